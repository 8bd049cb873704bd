import { I5_EXPECTED_FAULTS } from './expected-faults.js';
import type { FaultEvent, HistoryEvent } from '../history/events.js';
import { checkLinearizability, describeLeaseOp } from './linearizability.js';
import {
  status,
  violation,
  type CheckOptions,
  type InvariantStatus,
  type Violation,
} from './report.js';

export function checkI5(
  events: readonly HistoryEvent[],
  faults: FaultEvent[],
  tolerance: number,
  options: CheckOptions['linearizability'],
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  const r = checkLinearizability(events, { ...options, timeToleranceMs: tolerance });
  if (r.status === 'not_checked')
    return { status: 'not_checked', violations: [], note: 'no store_op records' };
  const untimed =
    r.untimedOps > 0
      ? `; ${r.untimedOps} without store-time bounds (expiry unconstrained there)`
      : '';
  const summary = `${r.ops} store ops on ${r.keys.length} key(s), ${r.steps} search steps${untimed}`;
  const violations: Violation[] = [];
  for (const k of r.keys) {
    if (k.status !== 'violated') continue;
    const c = k.counterexample;
    violations.push(
      violation(
        'I5',
        [
          `on ${c.key}, no linearization once ${c.culprit.op} is answered (window t ${c.from}..${c.to}): ${describeLeaseOp(c.culprit)}`,
          ...c.reasons.map((r) => `    why: ${r}`),
          ...c.ops.slice(1).map((o) => `    with: ${describeLeaseOp(o)}`),
          ...c.before.map((o) => `    after: ${describeLeaseOp(o)}`),
          ...(c.olderInfo > 0
            ? [`    and ${c.olderInfo} earlier :info operation(s) that may have taken effect`]
            : []),
        ].join('\n'),
        ...c.ops.flatMap((o) => o.events),
      ),
    );
  }
  if (violations.length > 0) {
    const expectedBy = faults.find((f) => I5_EXPECTED_FAULTS.has(f.fault));
    return {
      status: status(violations, expectedBy !== undefined),
      violations,
      note:
        expectedBy === undefined
          ? summary
          : `expected under fault ${expectedBy.fault}: the store is not a linearizable lease there; I1 must catch the consequences`,
    };
  }
  if (r.status === 'unknown') {
    const over = r.keys.filter((k) => k.status === 'unknown').map((k) => k.key);
    return {
      status: 'unknown',
      violations: [],
      note: `budget exceeded on key(s) ${over.join(', ')}; ${summary}`,
    };
  }
  return { status: 'ok', violations: [], note: summary };
}
