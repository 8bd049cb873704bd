import { I3_EXPECTED_FAULTS } from './expected-faults.js';
import type { FaultEvent } from '../history/events.js';
import { endOf, type Grant } from './grants.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

export function checkI3(
  grants: Grant[],
  faults: FaultEvent[],
  tolerance: number,
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  if (grants.length === 0)
    return { status: 'not_checked', violations: [], note: 'no store-side lease times' };
  const violations: Violation[] = [];
  // Overlaps between intervals of which one came from client-observed expiries: reported,
  // but undecidable by the store's clock (`unknown`), never counted as violated.
  const observed: Violation[] = [];
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byKey.get(g.key) ?? [];
    list.push(g);
    byKey.set(g.key, list);
  }
  for (const list of byKey.values()) {
    list.sort((a, b) => a.grantedAt - b.grantedAt || (a.token < b.token ? -1 : 1));
    let open: Grant | undefined;
    for (const g of list) {
      if (open !== undefined && g.grantedAt + tolerance < endOf(open)) {
        const clientView = open.clientObserved || g.clientObserved;
        (clientView ? observed : violations).push(
          violation(
            'I3',
            `on ${g.key}, token ${g.token} was granted at ${g.grantedAt} while token ${open.token} was valid until ${endOf(open)} (${clientView ? 'expiry observed by the client' : 'store clock'})`,
            open.event,
            g.event,
          ),
        );
      }
      if (open === undefined || endOf(g) > endOf(open)) open = g;
    }
  }
  const expectedBy = faults.find((f) => I3_EXPECTED_FAULTS.has(f.fault));
  const clientIntervals = grants.filter((g) => g.clientObserved).length;
  const clientNote =
    clientIntervals === 0
      ? undefined
      : `${clientIntervals} of ${grants.length} intervals from expiries observed by the client (the store states none on its clock)` +
        (observed.length > 0 ? `; ${observed.length} overlap(s) among them undecidable` : '');
  const notes = [
    expectedBy !== undefined && violations.length > 0
      ? `expected under fault ${expectedBy.fault}; I1 must catch the consequences`
      : undefined,
    clientNote,
  ].filter((n): n is string => n !== undefined);
  const st: InvariantStatus =
    violations.length > 0
      ? status(violations, expectedBy !== undefined)
      : observed.length > 0
        ? 'unknown'
        : 'ok';
  return {
    status: st,
    violations: [...violations, ...observed],
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
  };
}
