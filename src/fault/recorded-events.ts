import Database from 'better-sqlite3';
import type { HistoryEvent } from '../history/events.js';
import { sharedNow, type WorkerNotice } from './protocol.js';

/**
 * The history events the real-process harness makes from what its workers report and from
 * the protected resource's own log.
 */

/** The history's `storeExpiryObservedBy` of a worker's answer (etcd: the client's clock). */
export function observedBy(r: Record<string, unknown>): { storeExpiryObservedBy?: 'client' } {
  return r.storeExpiryObservedBy === 'client' ? { storeExpiryObservedBy: 'client' } : {};
}

/** The fields a write's events share. */
export interface WriteBase {
  readonly type: 'write';
  readonly proc: string;
  readonly op: string;
  readonly resource: string;
  readonly token: string;
}

/** A write's outcome in the history: `unknown` when the worker saw no answer (F3). */
export function writePhase(status: string): 'ok' | 'duplicate' | 'stale' | 'unknown' {
  if (status === 'applied') return 'ok';
  if (status === 'duplicate') return 'duplicate';
  return status === 'stale_fence' ? 'stale' : 'unknown';
}

/**
 * The event of worker `proc`'s notice, if it makes one: an event the worker recorded itself,
 * a background renewal (a new op from `newOp`), or a lost lease.
 */
export function noticeEvent(
  proc: string,
  n: WorkerNotice,
  newOp: () => string,
): HistoryEvent | undefined {
  if (n.event === 'history' && n.record !== undefined) return n.record;
  if (n.event === 'renewed' && n.detail !== undefined) {
    const d = n.detail;
    return {
      type: 'renew',
      phase: 'ok',
      t: n.t,
      proc,
      op: newOp(),
      key: String(d.key),
      token: String(d.token),
      lease: String(d.lease),
      ttlMs: Number(d.ttlMs),
      deadline: Number(d.deadline),
      ...(typeof d.storeExpiresAt === 'number' ? { storeExpiresAt: d.storeExpiresAt } : {}),
      ...observedBy(d),
    };
  }
  if (n.event !== 'lost' || n.detail === undefined) return undefined;
  return {
    type: 'lost',
    t: n.t,
    proc,
    key: typeof n.detail.key === 'string' ? n.detail.key : 'job',
    token: String(n.detail.token),
    ...(typeof n.detail.lease === 'string' ? { lease: n.detail.lease } : {}),
    reason: String(n.detail.reason),
  };
}

/** The resource's log (in commit order) and final contents, as history events. */
export function resourceEvents(resourcePath: string): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  const db = new Database(resourcePath, { timeout: 5000, readonly: true });
  try {
    const rows = db
      .prepare('SELECT t, proc, op, scope, token, action, hwm FROM job_log ORDER BY seq')
      .all() as {
      t: number;
      op: string;
      scope: string;
      token: string;
      action: 'applied' | 'rejected' | 'duplicate';
      hwm: string | null;
    }[];
    for (const r of rows)
      events.push({
        type: 'resource',
        action: r.action,
        t: r.t,
        op: r.op,
        resource: r.scope,
        token: r.token,
        ...(r.hwm === null ? {} : { hwm: r.hwm }),
      });
    const jobs = db.prepare('SELECT scope, body FROM job').all() as {
      scope: string;
      body: string;
    }[];
    for (const j of jobs)
      events.push({ type: 'final', t: sharedNow(), resource: j.scope, values: [j.body] });
  } finally {
    db.close();
  }
  return events;
}
