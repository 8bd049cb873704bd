import type { ClientEvent, HistoryEvent } from '../history/events.js';
import { endOf, type Grant } from './grants.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

export function checkLiveness(
  grants: Grant[],
  client: ClientEvent[],
  events: readonly HistoryEvent[],
  boundMs: number | undefined,
): {
  report: { status: InvariantStatus; violations: Violation[]; note?: string };
  takeovers: number[];
} {
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byKey.get(g.key) ?? [];
    list.push(g);
    byKey.set(g.key, list);
  }
  const takeovers: number[] = [];
  for (const list of byKey.values()) {
    list.sort((a, b) => (a.token < b.token ? -1 : 1));
    for (let i = 0; i + 1 < list.length; i++) {
      const prev = list[i]!;
      if (prev.releasedAt !== undefined) continue;
      takeovers.push(list[i + 1]!.grantedAt - prev.lastRenewAt);
    }
  }
  if (boundMs === undefined || grants.length === 0)
    return {
      report: {
        status: 'not_checked',
        violations: [],
        note: 'no liveness bound in meta or options',
      },
      takeovers,
    };
  const violations: Violation[] = [];
  const endT = events.reduce((m, e) => Math.max(m, e.t ?? 0), 0);
  // A crashed or frozen waiter is not a live contender.
  const stopped = new Set<string>();
  for (const e of events)
    if (e.type === 'fault' && e.proc !== undefined && (e.fault === 'crash' || e.fault === 'pause'))
      stopped.add(e.proc);
  // Acquire operations per key: [invoke, completion or +∞, got it?]
  const ops = new Map<string, { invoke: ClientEvent; done: number; ok: boolean }>();
  for (const e of client) {
    if (e.type !== 'acquire') continue;
    if (e.phase === 'invoke')
      ops.set(e.op, { invoke: e, done: Number.POSITIVE_INFINITY, ok: false });
    else {
      const op = ops.get(e.op);
      if (op) {
        op.done = e.t;
        op.ok = e.phase === 'ok';
      }
    }
  }
  for (const [key, list] of byKey) {
    for (let i = 0; i < list.length; i++) {
      const prev = list[i]!;
      const freeAt = endOf(prev);
      const next = list[i + 1];
      const deadline = freeAt + boundMs;
      if (deadline > endT) continue;
      if (next !== undefined && next.grantedAt <= deadline) continue;
      const starved = [...ops.values()].find(
        (o) =>
          o.invoke.key === key &&
          o.invoke.t <= freeAt &&
          o.done > deadline &&
          !stopped.has(o.invoke.proc),
      );
      if (starved !== undefined) {
        violations.push(
          violation(
            'I8',
            `${key} was free from ${freeAt} (store clock) but ${starved.invoke.proc}'s waiting acquire ${starved.invoke.op} got no grant within ${boundMs}ms`,
            prev.event,
            starved.invoke,
          ),
        );
      }
    }
  }
  return { report: { status: status(violations), violations }, takeovers };
}
