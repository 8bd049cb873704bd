import type { ClientEvent, HistoryEvent, StoreEvent } from '../history/events.js';

export interface Grant {
  key: string;
  lease: string;
  token: bigint;
  grantedAt: number;
  expiresAt: number;
  lastRenewAt: number;
  releasedAt: number | undefined;
  event: HistoryEvent;
  /**
   * The interval comes from expiries the client observed (its clock plus the TTL, etcd), not
   * from the store's clock: an overlap it shows is a measurement, not a store-clock fact.
   */
  clientObserved: boolean;
}

/**
 * Store-side lease intervals: from `store` events when the history has them (they include
 * grants whose answer was lost), else from clients' `ok` answers carrying store expiry.
 */
export function collectGrants(client: ClientEvent[], store: StoreEvent[]): Grant[] {
  const byLease = new Map<string, Grant>();
  const grants: Grant[] = [];
  const leaseKey = (key: string, lease: string | undefined, token: string | undefined) =>
    `${key}\u0000${lease ?? ''}\u0000${token ?? ''}`;
  if (store.length > 0) {
    for (const e of store) {
      const id = leaseKey(e.key, e.lease, e.token);
      if (e.action === 'grant' && e.token !== undefined && e.expiresAt !== undefined) {
        if (byLease.has(id)) continue; // an idempotent retry of the same acquisition
        const g: Grant = {
          key: e.key,
          lease: e.lease ?? e.token,
          token: BigInt(e.token),
          grantedAt: e.at,
          expiresAt: e.expiresAt,
          lastRenewAt: e.at,
          releasedAt: undefined,
          event: e,
          clientObserved: false,
        };
        byLease.set(id, g);
        grants.push(g);
      } else if (e.action === 'renewed' && e.expiresAt !== undefined) {
        const g = byLease.get(id);
        if (g) {
          g.expiresAt = Math.max(g.expiresAt, e.expiresAt);
          g.lastRenewAt = e.at;
        }
      } else if (e.action === 'released') {
        const g = byLease.get(id);
        if (g && g.releasedAt === undefined) g.releasedAt = e.at;
      }
    }
    return grants;
  }
  const leaseTtl = new Map<string, number>();
  const invokedAt = new Map<string, number>();
  for (const e of client) {
    if (e.phase === 'invoke') {
      invokedAt.set(e.op, e.t);
      if (e.ttlMs !== undefined) leaseTtl.set(e.op, e.ttlMs);
    }
    const id = leaseKey(e.key, e.lease, e.token);
    if (e.type === 'acquire' && e.phase === 'ok' && e.storeExpiresAt !== undefined) {
      if (byLease.has(id) || e.token === undefined) continue;
      const ttl = e.ttlMs ?? leaseTtl.get(e.op);
      if (ttl === undefined) continue;
      const g: Grant = {
        key: e.key,
        lease: e.lease ?? e.token,
        token: BigInt(e.token),
        grantedAt: e.storeExpiresAt - ttl,
        expiresAt: e.storeExpiresAt,
        lastRenewAt: e.storeExpiresAt - ttl,
        releasedAt: undefined,
        event: e,
        clientObserved: e.storeExpiryObservedBy === 'client',
      };
      byLease.set(id, g);
      grants.push(g);
    } else if (e.type === 'renew' && e.phase === 'ok' && e.storeExpiresAt !== undefined) {
      const g = byLease.get(id);
      const ttl = e.ttlMs ?? leaseTtl.get(e.op);
      if (g) {
        g.expiresAt = Math.max(g.expiresAt, e.storeExpiresAt);
        if (ttl !== undefined) g.lastRenewAt = e.storeExpiresAt - ttl;
        if (e.storeExpiryObservedBy === 'client') g.clientObserved = true;
      }
    } else if (e.type === 'release' && e.phase === 'released') {
      const g = byLease.get(id);
      // Without store time, the release took effect somewhere between its invoke and its
      // answer. A grant before the invoke overlaps for certain; one inside the window is what
      // a linearizable store may do (the release applied, then the next grant — behind a
      // server the answer comes tens of ms after the server granted the next waiter), and
      // I5 decides whether the answers fit one mutex. So the interval ends at the invoke.
      const at = invokedAt.get(e.op) ?? e.t;
      if (g && g.releasedAt === undefined) g.releasedAt = Math.min(at, g.expiresAt);
    }
  }
  return grants;
}

export function endOf(g: Grant): number {
  return g.releasedAt === undefined ? g.expiresAt : Math.min(g.expiresAt, g.releasedAt);
}

export function isClientEvent(e: HistoryEvent): e is ClientEvent {
  return e.type === 'acquire' || e.type === 'renew' || e.type === 'release';
}

export function countLocalSuccessions(client: ClientEvent[], store: StoreEvent[]): number {
  if (store.length === 0) return 0;
  const granted = new Set<string>();
  for (const e of store)
    if (e.action === 'grant') granted.add(`${e.key}\u0000${e.lease}\u0000${e.token}`);
  return client.filter(
    (e) =>
      e.type === 'acquire' &&
      e.phase === 'ok' &&
      e.lease !== undefined &&
      !granted.has(`${e.key}\u0000${e.lease}\u0000${e.token}`),
  ).length;
}
