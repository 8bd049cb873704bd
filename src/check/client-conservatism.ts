import { I3_EXPECTED_FAULTS, I4_EXPECTED_FAULTS } from './expected-faults.js';
import type { ClientEvent, FaultEvent, HistoryEvent } from '../history/events.js';
import { violation, type InvariantStatus, type Violation } from './report.js';

export function checkI4(
  events: readonly HistoryEvent[],
  faults: FaultEvent[],
  tolerance: number,
): {
  report: { status: InvariantStatus; violations: Violation[]; note?: string };
  minSlack: number | undefined;
} {
  const latest = new Map<string, number>();
  const violations: Violation[] = [];
  const expectedProcs = new Set<string>();
  let globalExpected = false;
  for (const f of faults) {
    if (!I4_EXPECTED_FAULTS.has(f.fault)) continue;
    if (f.proc === undefined || I3_EXPECTED_FAULTS.has(f.fault)) globalExpected = true;
    else expectedProcs.add(f.proc);
  }
  let minSlack: number | undefined;
  let checked = 0;
  let unexpected = 0;
  let observedByClient = 0;
  for (const e of events) {
    if (e.type === 'store') {
      // The store's latest expiry for a lease, as of this point in the history.
      if ((e.action === 'grant' || e.action === 'renewed') && e.expiresAt !== undefined)
        latest.set(`${e.key}\u0000${e.lease ?? e.token ?? ''}`, e.expiresAt);
      continue;
    }
    if (e.type !== 'acquire' && e.type !== 'renew') continue;
    if (e.phase !== 'ok' || e.deadline === undefined) continue;
    if (e.storeExpiresAt !== undefined && e.storeExpiryObservedBy === 'client') {
      // The client's clock on both sides: nothing independent to compare its deadline with.
      observedByClient++;
      continue;
    }
    const storeExpiry = e.storeExpiresAt ?? latest.get(`${e.key}\u0000${e.lease ?? e.token ?? ''}`);
    if (storeExpiry === undefined) continue;
    checked++;
    const slack = storeExpiry - e.deadline;
    const excused = globalExpected || expectedProcs.has(e.proc);
    if (!excused) minSlack = minSlack === undefined ? slack : Math.min(minSlack, slack);
    if (slack < -tolerance) {
      if (!excused) unexpected++;
      violations.push(
        violation(
          'I4',
          `${e.proc}'s deadline ${e.deadline} for token ${e.token} on ${e.key} is ${-slack}ms after the store's expiry ${storeExpiry}`,
          e,
        ),
      );
    }
  }
  if (checked === 0)
    return {
      report: {
        status: 'not_checked',
        violations: [],
        note:
          observedByClient > 0
            ? `the store's expiry was only observed by the client (${observedByClient} answers): no store clock to compare deadlines with`
            : 'no client deadlines with store expiry',
      },
      minSlack,
    };
  const st: InvariantStatus =
    violations.length === 0 ? 'ok' : unexpected > 0 ? 'violated' : 'expected';
  // Unexpected ones first, so the counterexamples shown are the ones that matter.
  violations.sort(
    (a, b) =>
      Number(expectedProcs.has((a.events[0] as ClientEvent).proc)) -
      Number(expectedProcs.has((b.events[0] as ClientEvent).proc)),
  );
  return {
    report: {
      status: st,
      violations,
      ...(st === 'expected' ? { note: 'expected under an injected client clock fault' } : {}),
    },
    minSlack,
  };
}
