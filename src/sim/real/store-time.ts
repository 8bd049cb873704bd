/**
 * Store time in real-process histories (I5). A real store decides expiry by its own clock,
 * which a worker cannot read at the instant of each request; every store of the harness runs
 * on this machine, though, so its clock runs at the rate of the history's `t` (the machine's
 * monotonic clock). The harness therefore sets `meta.storeTimeFromT` and leaves `storeAt` out:
 * a request took effect at a store time between its invocation's `t` and its answer's `t`,
 * give or take `meta.timeToleranceMs` (see docs/history-format.md, "Store time").
 *
 * That is exact enough where the store's expiry is exact on its clock (SQLite: the machine's
 * monotonic clock; PostgreSQL: its transaction clock; Redis: `PX` expiry checked on every
 * access, to the ms). etcd is the exception: its expiry is a session lease of whole seconds
 * plus a headroom, revoked by the leader's periodic expiry loop, so a key may stay taken up to
 * {@link storeExpiryLagMs} longer than the TTL asked for. Those answers carry an explicit
 * `storeAt` upper bound that much later than `t`.
 */
import type { StoreOpEvent } from '../history.js';

/** etcd's default session headroom (`EtcdLeaseStore` `sessionHeadroomS`, 1 s; the URL form the harness uses cannot change it). */
const ETCD_SESSION_HEADROOM_MS = 1000;

/**
 * How late after its deadline etcd may revoke an expired lease: the leader checks for expired
 * leases every 500 ms and revokes them through raft, which takes a while more on a loaded
 * 2-core machine.
 */
const ETCD_REVOKE_LAG_MS = 1000;

/**
 * How much later than the model's `T + ttl` the store at `storeUrl` may still hold a key it
 * granted or renewed at store time `T` with `ttlMs` (0 where expiry is exact on the store's
 * clock). Widening an answer's store-time upper bound by this much lets the grant or renewal
 * take effect late enough to explain the store's late expiry; everything else (ownership,
 * tokens, real-time order) is checked as tightly as before.
 */
export function storeExpiryLagMs(storeUrl: string, ttlMs: number | undefined): number {
  if (!storeUrl.startsWith('etcd:')) return 0;
  // The session's etcd TTL is the entries' TTL rounded up to whole seconds.
  const rounding = ttlMs === undefined ? 0 : Math.ceil(ttlMs / 1000) * 1000 - ttlMs;
  return rounding + ETCD_SESSION_HEADROOM_MS + ETCD_REVOKE_LAG_MS;
}

/**
 * Puts a worker's `store_op` events on the real-process history's store-time footing: drops
 * the `storeAt` the recorder stamped from the worker's clock (the harness's `storeTimeFromT`
 * says the same, and says it is an assumption about the store), and gives each answer from a
 * store with an expiry lag an explicit upper bound that much after its `t`.
 */
export class StoreTimeStamper {
  /** TTL of each request in flight, by op id (its answer carries none). */
  private readonly ttls = new Map<string, number | undefined>();

  constructor(private readonly storeUrl: string) {}

  stamp(event: StoreOpEvent): StoreOpEvent {
    const { storeAt: _fromWorkerClock, ...rest } = event;
    if (event.phase === 'invoke') {
      this.ttls.set(event.op, event.ttlMs);
      return rest;
    }
    const lag = storeExpiryLagMs(this.storeUrl, this.ttls.get(event.op));
    this.ttls.delete(event.op);
    return lag > 0 ? { ...rest, storeAt: event.t + lag } : rest;
  }
}
