import { parseSlotKey } from '../core/slot-keys.js';
import type { ClientEvent, FaultEvent } from '../history/events.js';
import { I3_EXPECTED_FAULTS } from './expected-faults.js';
import { endOf, type Grant } from './grants.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

/**
 * I10: by the store's clock, no more leases on a semaphore's slots are valid at once than the
 * largest limit any acquisition of that semaphore asked for. Slots are keys
 * (`name#slot=i`), so this reads the same store-side intervals as I3, grouped by semaphore;
 * the limit comes from the `limit` field of the slot acquisitions. Expected to fail under the
 * faults that break I3 (a store clock jump …): then I1 must catch the consequences.
 */
export function checkI10(
  grants: readonly Grant[],
  client: readonly ClientEvent[],
  faults: readonly FaultEvent[],
  tolerance: number,
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  const limits = new Map<string, number>();
  for (const e of client) {
    if (e.type !== 'acquire' || e.limit === undefined) continue;
    const name = parseSlotKey(e.key)?.name ?? e.key;
    limits.set(name, Math.max(limits.get(name) ?? 0, e.limit));
  }
  if (limits.size === 0) return { status: 'not_checked', violations: [], note: 'no semaphores' };
  const bySemaphore = new Map<string, Grant[]>();
  for (const g of grants) {
    const name = parseSlotKey(g.key)?.name;
    if (name === undefined || !limits.has(name)) continue;
    const list = bySemaphore.get(name) ?? [];
    list.push(g);
    bySemaphore.set(name, list);
  }
  const violations: Violation[] = [];
  let observed = 0;
  for (const [name, list] of bySemaphore) {
    const limit = limits.get(name)!;
    // A grant counts from its grant to its end; one that starts within `tolerance` of
    // another's end does not overlap it.
    list.sort((a, b) => a.grantedAt - b.grantedAt || (a.token < b.token ? -1 : 1));
    const open: Grant[] = [];
    for (const g of list) {
      for (let i = open.length - 1; i >= 0; i--)
        if (endOf(open[i]!) <= g.grantedAt + tolerance) open.splice(i, 1);
      open.push(g);
      if (open.length <= limit) continue;
      if (open.some((o) => o.clientObserved)) {
        observed++;
        continue;
      }
      violations.push(
        violation(
          'I10',
          `semaphore ${name} (limit ${limit}) had ${open.length} valid holders at ${g.grantedAt} by the store's clock: ${open.map((o) => `${o.key} token ${o.token}`).join(', ')}`,
          ...open.map((o) => o.event),
        ),
      );
    }
  }
  const expectedBy = faults.find((f) => I3_EXPECTED_FAULTS.has(f.fault));
  const notes = [
    expectedBy !== undefined && violations.length > 0
      ? `expected under fault ${expectedBy.fault}; I1 must catch the consequences`
      : undefined,
    observed > 0 ? `${observed} excess(es) among intervals observed by the client` : undefined,
  ].filter((n): n is string => n !== undefined);
  const st: InvariantStatus =
    violations.length > 0
      ? status(violations, expectedBy !== undefined)
      : observed > 0
        ? 'unknown'
        : 'ok';
  return { status: st, violations, ...(notes.length > 0 ? { note: notes.join('; ') } : {}) };
}
