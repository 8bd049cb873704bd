import type { HistoryEvent, StoreEvent } from '../history/events.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

export function checkI7(
  store: StoreEvent[],
  events: readonly HistoryEvent[],
): { status: InvariantStatus; violations: Violation[] } {
  const violations: Violation[] = [];
  // At the store: a renew or release succeeds only for the key's current, unexpired lease.
  const current = new Map<
    string,
    { lease?: string; token: string; expiresAt: number; released: boolean }
  >();
  for (const e of store) {
    const cur = current.get(e.key);
    if (e.action === 'grant' && e.token !== undefined) {
      current.set(e.key, {
        lease: e.lease,
        token: e.token,
        expiresAt: e.expiresAt ?? Number.POSITIVE_INFINITY,
        released: false,
      });
    } else if (e.action === 'renewed' || e.action === 'released') {
      const same = cur !== undefined && cur.token === e.token && cur.lease === e.lease;
      if (!same) {
        violations.push(
          violation(
            'I7',
            `store ${e.action === 'renewed' ? 'renewed' : 'released'} token ${e.token} on ${e.key} while the current lease has token ${cur?.token ?? 'none'}`,
            e,
          ),
        );
      } else if (cur.released || e.at >= cur.expiresAt) {
        if (e.action === 'renewed') {
          violations.push(
            violation(
              'I7',
              `store renewed token ${e.token} on ${e.key} at ${e.at}, after it ${cur.released ? 'was released' : `expired at ${cur.expiresAt}`} (resurrection)`,
              e,
            ),
          );
        }
      } else if (e.action === 'renewed' && e.expiresAt !== undefined) {
        cur.expiresAt = e.expiresAt;
      } else if (e.action === 'released') {
        cur.released = true;
      }
    }
  }
  // At the client: a lease it has given up is never renewed again.
  const lostAt = new Map<string, HistoryEvent>();
  for (const e of events) {
    if (e.type === 'lost') lostAt.set(`${e.key}\u0000${e.token}\u0000${e.lease ?? ''}`, e);
    else if (e.type === 'renew' && e.phase === 'ok') {
      const prior = lostAt.get(`${e.key}\u0000${e.token}\u0000${e.lease ?? ''}`);
      if (prior !== undefined) {
        violations.push(
          violation(
            'I7',
            `${e.proc} reported token ${e.token} on ${e.key} renewed after it was lost`,
            prior,
            e,
          ),
        );
      }
    }
  }
  return { status: status(violations), violations };
}
