import type { ClientEvent, StoreEvent } from '../history/events.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

export function checkI2(
  client: ClientEvent[],
  store: StoreEvent[],
): { status: InvariantStatus; violations: Violation[] } {
  const violations: Violation[] = [];
  const invokes = new Map<string, ClientEvent>();
  const oks: { invoke: ClientEvent; ok: ClientEvent }[] = [];
  for (const e of client) {
    if (e.type !== 'acquire') continue;
    if (e.phase === 'invoke') invokes.set(e.op, e);
    else if (e.phase === 'ok' && e.token !== undefined) {
      const inv = invokes.get(e.op);
      oks.push({ invoke: inv ?? e, ok: e });
    }
  }
  // Uniqueness: one token, one acquisition (a retried request of the same lease may repeat it).
  const seen = new Map<string, ClientEvent>();
  for (const { ok } of oks) {
    const id = `${ok.key}\u0000${ok.token}`;
    const prev = seen.get(id);
    if (prev !== undefined && (prev.lease === undefined || prev.lease !== ok.lease)) {
      violations.push(
        violation('I2', `token ${ok.token} on ${ok.key} was granted to two acquisitions`, prev, ok),
      );
    } else seen.set(id, ok);
  }
  // Real-time order: if A completed before B was invoked, token(A) < token(B).
  const byKey = new Map<string, { invoke: ClientEvent; ok: ClientEvent }[]>();
  for (const p of oks) {
    const list = byKey.get(p.ok.key) ?? [];
    list.push(p);
    byKey.set(p.ok.key, list);
  }
  for (const list of byKey.values()) {
    const byOk = [...list].sort((a, b) => a.ok.t - b.ok.t);
    const byInvoke = [...list].sort((a, b) => a.invoke.t - b.invoke.t);
    let i = 0;
    let best: { token: bigint; ok: ClientEvent } | undefined;
    for (const b of byInvoke) {
      while (i < byOk.length && byOk[i]!.ok.t < b.invoke.t) {
        const tok = BigInt(byOk[i]!.ok.token!);
        if (best === undefined || tok > best.token) best = { token: tok, ok: byOk[i]!.ok };
        i++;
      }
      if (best !== undefined && BigInt(b.ok.token!) <= best.token) {
        violations.push(
          violation(
            'I2',
            `acquisition with token ${b.ok.token} on ${b.ok.key} was invoked after one with token ${best.token} completed`,
            best.ok,
            b.invoke,
            b.ok,
          ),
        );
      }
    }
  }
  // At the store, grants on a key carry strictly increasing tokens in the store's order.
  const last = new Map<string, { token: bigint; event: StoreEvent; lease?: string }>();
  for (const e of store) {
    if (e.action !== 'grant' || e.token === undefined) continue;
    const tok = BigInt(e.token);
    const prev = last.get(e.key);
    if (
      prev !== undefined &&
      tok <= prev.token &&
      !(tok === prev.token && e.lease === prev.lease)
    ) {
      violations.push(
        violation(
          'I2',
          `store granted token ${tok} on ${e.key} after token ${prev.token}`,
          prev.event,
          e,
        ),
      );
    }
    if (prev === undefined || tok > prev.token)
      last.set(e.key, { token: tok, event: e, lease: e.lease });
  }
  return { status: status(violations), violations };
}
