import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A key (or fencing scope) no other test uses: the kits run against real, shared stores, so
 * isolation is by a unique prefix per case.
 */
export function uniqueKey(label: string): string {
  return `test/${label}/${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * Lets real time pass — for a lease to expire at a real store, never to "wait out" a race.
 * Interleavings are driven by barriers, the ManualClock or signals instead.
 */
export function elapse(ms: number): Promise<void> {
  return sleep(ms);
}

/**
 * Polls `probe` until it returns a value other than undefined, failing after `timeoutMs`
 * (generous: an upper bound on a loaded 2-core machine, not an expectation).
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  { timeoutMs = 10_000, intervalMs = 20 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const start = performance.now();
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (performance.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}
