import assert from 'node:assert/strict';
import { isLeaseholdError } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';
import type { KitCaseContext } from '../kit/runner.js';
import type {
  FenceFeature,
  FenceHarness,
  FencePolicy,
  FenceUnderTest,
  FenceWriteOutcome,
} from './harness.js';

// The helpers every case of the fence contract shares.

/** Opens `n` instances of the fence with `policy`, runs `fn`, and always closes them. */
export async function withFences<T>(
  h: FenceHarness,
  policy: FencePolicy,
  n: number,
  fn: (fences: FenceUnderTest[]) => Promise<T>,
): Promise<T> {
  const fences: FenceUnderTest[] = [];
  try {
    for (let i = 0; i < n; i++) fences.push(await h.open(policy));
    return await fn(fences);
  } finally {
    for (const f of fences) {
      try {
        await f.close();
      } catch {
        // A close that fails must not hide the case's own failure.
      }
    }
  }
}

/**
 * True when the harness has `feature`; otherwise marks the case skipped with the harness's
 * reason and answers false (the case then returns).
 */
export function has(h: FenceHarness, feature: FenceFeature, t: KitCaseContext): boolean {
  const reason = h.lacks?.[feature];
  if (reason === undefined) return true;
  t.skip(`${h.name} has no ${feature}: ${reason}`);
  return false;
}

/** The policies the harness has, each a case runs under. */
export function policiesOf(h: FenceHarness): FencePolicy[] {
  return (['>=', '>'] as const).filter((p) => h.lacks?.[`policy ${p}`] === undefined);
}

export function applied(r: FenceWriteOutcome, what: string): void {
  assert.equal(r.status, 'applied', `${what}: expected applied, got ${JSON.stringify(show(r))}`);
}

export function stale(r: FenceWriteOutcome | ClaimResult, mark: bigint, what: string): void {
  assert.equal(
    r.status,
    'stale_fence',
    `${what}: expected stale_fence, got ${JSON.stringify(show(r))}`,
  );
  assert.equal(
    (r as { highWaterMark: bigint }).highWaterMark,
    mark,
    `${what}: the answer names the scope's mark`,
  );
}

export async function claimApplied(f: FenceUnderTest, scope: string, token: bigint, what: string) {
  const r = await f.claim(scope, token);
  assert.equal(r.status, 'applied', `${what}: claim ${token}: ${JSON.stringify(show(r))}`);
}

/** An answer with its bigints as strings, for messages. */
export function show(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)));
}

/** Resolves when `p` rejects with `ERR_INVALID_ARGUMENT`; fails the case otherwise. */
export async function rejectsInvalid(p: () => unknown, what: string): Promise<void> {
  let outcome: unknown;
  try {
    outcome = await p();
  } catch (err) {
    if (isLeaseholdError(err, 'ERR_INVALID_ARGUMENT')) return;
    assert.fail(`${what}: expected ERR_INVALID_ARGUMENT, got ${String(err)}`);
  }
  assert.fail(
    `${what}: expected ERR_INVALID_ARGUMENT, got the answer ${JSON.stringify(show(outcome))}`,
  );
}

/** A fixed pseudo-random sequence (a seeded LCG), so a failing interleaving replays. */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** The token a value written by the cases carries (`<token>:<label>`). */
export function tokenOfValue(value: string): bigint {
  return BigInt(value.slice(0, value.indexOf(':')));
}
