import type { FaultEvent } from '../history/events.js';
import { I3_EXPECTED_FAULTS } from './expected-faults.js';
import type { Grant } from './grants.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

/**
 * I12: a key whose lease ended by expiry (not by release) is not granted again, by the
 * store's clock, before the lock-delay that lease asked for has passed — unless the new
 * acquisition skipped the delay (`ignoreLockDelay`). A release, even a late one, ends the
 * delay: the store then knows the holder let go. Reads the store-side grants and their
 * `lockDelayMs`; expected to fail under the faults that break I3 (the store's clock jumps).
 */
export function checkI12(
  grants: readonly Grant[],
  faults: readonly FaultEvent[],
  tolerance: number,
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  const delayOf = (g: Grant): number => (g.event.type === 'store' ? (g.event.lockDelayMs ?? 0) : 0);
  if (!grants.some((g) => delayOf(g) > 0))
    return { status: 'not_checked', violations: [], note: 'no grant asked for a lock-delay' };
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byKey.get(g.key) ?? [];
    list.push(g);
    byKey.set(g.key, list);
  }
  const violations: Violation[] = [];
  for (const list of byKey.values()) {
    list.sort((a, b) => a.grantedAt - b.grantedAt || (a.token < b.token ? -1 : 1));
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const next = list[i]!;
      const delay = delayOf(prev);
      if (delay <= 0 || next.grantedAt < prev.expiresAt) continue; // an overlap is I3's
      if (prev.releasedAt !== undefined && prev.releasedAt < prev.expiresAt) continue;
      const shutUntil = Math.min(prev.expiresAt + delay, prev.releasedAt ?? Infinity);
      const skipped = next.event.type === 'store' && next.event.ignoreLockDelay === true;
      if (skipped || next.grantedAt + tolerance >= shutUntil) continue;
      violations.push(
        violation(
          'I12',
          `on ${next.key}, token ${next.token} was granted at ${next.grantedAt}, ${next.grantedAt - prev.expiresAt}ms after token ${prev.token} expired, within its lock-delay of ${delay}ms (store clock)`,
          prev.event,
          next.event,
        ),
      );
    }
  }
  const expectedBy = faults.find((f) => I3_EXPECTED_FAULTS.has(f.fault));
  return {
    status: status(violations, expectedBy !== undefined),
    violations,
    ...(expectedBy !== undefined && violations.length > 0
      ? { note: `expected under fault ${expectedBy.fault}` }
      : {}),
  };
}
