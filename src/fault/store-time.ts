/**
 * Store time in real-process histories (I5). A real store decides expiry by its own clock,
 * which a worker cannot read at the instant of each request; every store of the harness runs
 * on this machine, though, so its clock runs at the rate of the history's `t` (the machine's
 * monotonic clock). The harness therefore sets `meta.storeTimeFromT` and leaves `storeAt` out:
 * a request took effect at a store time between its invocation's `t` and its answer's `t`,
 * give or take `meta.timeToleranceMs` (see docs/history-format.md, "Store time").
 *
 * That is exact enough where the store's expiry is exact on its clock (SQLite: the machine's
 * monotonic clock; PostgreSQL: `clock_timestamp()`; Redis: `TIME`, to the ms). etcd is the
 * exception: its expiry is a session lease of whole seconds plus a headroom, revoked by the
 * leader's periodic expiry loop, so a key may stay taken up to {@link storeExpiryLagMs} longer
 * than the TTL asked for (never shorter). {@link allowExpiryLag} widens exactly the answers
 * that lag can explain (`busy`).
 */
import type { HistoryEvent, StoreOpEvent } from '../history/events.js';

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
 * clock).
 */
export function storeExpiryLagMs(storeUrl: string, ttlMs: number | undefined): number {
  if (!storeUrl.startsWith('etcd:')) return 0;
  // The session's etcd TTL is the entries' TTL rounded up to whole seconds.
  const rounding = ttlMs === undefined ? 0 : Math.ceil(ttlMs / 1000) * 1000 - ttlMs;
  return rounding + ETCD_SESSION_HEADROOM_MS + ETCD_REVOKE_LAG_MS;
}

/**
 * A worker's `store_op` event as the real-process history records it: without the `storeAt`
 * the recorder stamped from the worker's clock — the harness's `storeTimeFromT` says the
 * same thing, and says it is an assumption about the store.
 */
export function withoutWorkerStoreTime(event: StoreOpEvent): StoreOpEvent {
  const { storeAt: _fromWorkerClock, ...rest } = event;
  return rest;
}

/**
 * Lets the answer a late expiry explains take effect that much earlier: a `busy` (the key was
 * still taken) from a store that may hold a key {@link storeExpiryLagMs} past `T + ttl` gets
 * an explicit `storeAt` that much before its invocation. Everything else keeps its tight
 * window: grants, so a grant while another lease is live by `T + ttl` is still caught, and
 * renewals (etcd's store answers `lost` once the lease's TTL has passed on its own clock,
 * whatever etcd still holds). A `busy` more than the lag past the expiry is caught too.
 *
 * Returns a new event list; `storeUrlOf(proc)` is the store the worker `proc` used.
 */
export function allowExpiryLag(
  events: readonly HistoryEvent[],
  storeUrlOf: (proc: string) => string | undefined,
): HistoryEvent[] {
  const answers = new Map<string, StoreOpEvent>();
  for (const e of events)
    if (e.type === 'store_op' && e.phase !== 'invoke' && !answers.has(e.op)) answers.set(e.op, e);
  // The largest lag of any lease on a key: the one being waited for may be another's.
  const lagOfKey = new Map<string, number>();
  for (const e of events) {
    if (e.type !== 'store_op' || e.phase !== 'invoke') continue;
    const url = storeUrlOf(e.proc);
    const lag = url === undefined ? 0 : storeExpiryLagMs(url, e.ttlMs);
    lagOfKey.set(e.key, Math.max(lagOfKey.get(e.key) ?? 0, lag));
  }
  return events.map((e) => {
    if (e.type !== 'store_op' || e.phase !== 'invoke' || e.storeAt !== undefined) return e;
    const lag = lagOfKey.get(e.key) ?? 0;
    const answer = answers.get(e.op)?.phase;
    if (lag === 0 || answer !== 'busy') return e;
    return { ...e, storeAt: e.t - lag };
  });
}
