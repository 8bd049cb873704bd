import type { HistoryEvent, ResourceEvent, WriteEvent } from '../history/events.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

export function checkI6(
  events: readonly HistoryEvent[],
  writes: WriteEvent[],
  resource: ResourceEvent[],
): { report: { status: InvariantStatus; violations: Violation[]; note?: string }; lost: number } {
  const violations: Violation[] = [];
  const rejected = new Map<string, ResourceEvent>();
  for (const r of resource) if (r.action === 'rejected') rejected.set(r.op, r);
  const invokes = new Map<string, WriteEvent>();
  for (const w of writes) if (w.phase === 'invoke') invokes.set(w.op, w);
  for (const w of writes) {
    if (w.phase === 'ok' && rejected.has(w.op)) {
      violations.push(
        violation(
          'I6',
          `write ${w.op} (token ${w.token}) was rejected by the resource but acknowledged to ${w.proc} as applied`,
          rejected.get(w.op)!,
          w,
        ),
      );
    }
  }
  const finals = new Map<string, Set<string>>();
  let finalSeen = false;
  for (const e of events) {
    if (e.type !== 'final') continue;
    finalSeen = true;
    finals.set(e.resource, new Set(e.values));
  }
  let lost = 0;
  if (finalSeen) {
    for (const w of writes) {
      if (w.phase !== 'ok') continue;
      const value = w.value ?? invokes.get(w.op)?.value;
      const contents = finals.get(w.resource);
      if (value === undefined || contents === undefined) continue;
      if (!contents.has(value)) {
        lost++;
        violations.push(
          violation(
            'I6',
            `write ${w.op} by ${w.proc} (token ${w.token}, value ${value}) was acknowledged but is missing from ${w.resource} at the end`,
            invokes.get(w.op) ?? w,
            w,
          ),
        );
      }
    }
  }
  const checked = finalSeen || rejected.size > 0;
  return {
    report: checked
      ? { status: status(violations), violations }
      : { status: 'not_checked', violations: [], note: 'no final read and no rejections' },
    lost,
  };
}
