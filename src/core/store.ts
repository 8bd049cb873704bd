import type { RequestOptions } from './runtime/request.js';
import type { LeaseState, StoreCapabilities, Token, HolderInfo } from './types.js';

/**
 * Every store request carries a timeout and a signal. The timeout is never longer than
 * what the caller can still use (for a renewal: the lease's remaining local validity), so
 * a store should bound its own work by it (`statement_timeout`, command timeout). The
 * client also races every request against it, and treats a late answer as no answer.
 */
export type StoreRequestOptions = RequestOptions;

/** One acquisition attempt, fully validated by the caller. */
export interface StoreAcquireRequest {
  readonly key: string;
  /** Chosen by the client (a random UUID), so a retried or abandoned request can be identified. */
  readonly leaseId: string;
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly value: string | undefined;
  /**
   * How many tokens the grant reserves (1 when absent): the grant's own token `t`, and every
   * later grant for the key gets a token ≥ `t + tokenBlock`, so `t + 1 … t + tokenBlock − 1`
   * are free for the client's local successors under this store lease (decision 007). The
   * record keeps `t` (renew and release compare it); `inspect`'s `lastToken` shows the top of
   * the block. Sent only to stores with `capabilities.tokenBlocks`, from 1 to
   * `LIMITS.maxTokenBlock`. An idempotent retry answers `t` again.
   */
  readonly tokenBlock?: number;
  /**
   * Lock-delay: when this grant ends **by expiry** (not by release), the store refuses every
   * grant of the key until `lockDelayMs` more have passed by its clock, answering `busy` with
   * `reason: 'lock_delay'` and the exact `retryAfterMs`. Sent only to stores with
   * `capabilities.lockDelay`, and only when above 0.
   */
  readonly lockDelayMs?: number;
  /** Grant even during the key's lock-delay (the caller's writes are fenced). */
  readonly ignoreLockDelay?: boolean;
}

/** The identity of one granted lease: renew and release are conditional on all of it. */
export interface StoreLeaseRef {
  readonly key: string;
  readonly leaseId: string;
  readonly token: Token;
}

/**
 * A store's answer to one acquisition attempt: `acquired` with the grant's token, or `busy`
 * with who holds the key and when to try again. Failures to answer throw `ERR_UNAVAILABLE`.
 */
export type StoreAcquireResult =
  | {
      readonly status: 'acquired';
      readonly token: Token;
      /** The store's expiry as wall-clock ms, for display and history only. */
      readonly expiresAtWallMs?: number;
    }
  | {
      readonly status: 'busy';
      readonly holder: HolderInfo;
      readonly retryAfterMs: number;
      /**
       * `lock_delay`: no live holder, but the last one (`holder`, `remainingMs` 0) ended by
       * expiry and the key's lock-delay has `retryAfterMs` left. Absent means `held`.
       */
      readonly reason?: BusyReason;
    };

/** Why a key is busy: a live holder, or the lock-delay after a holder's expiry. */
export type BusyReason = 'held' | 'lock_delay';

/**
 * A store's answer to a renewal: `renewed` (extended by the TTL) or `lost` (not held any more).
 * A `lost` answer may say why, when the store knows that the lease ended because the store
 * itself changed incarnation (a failover or a restore; decision 042): the client then reports
 * that reason instead of a plain `lost`.
 */
export type StoreRenewResult =
  | { readonly status: 'renewed'; readonly expiresAtWallMs?: number }
  | { readonly status: 'lost'; readonly reason?: StoreLossReason };

/**
 * Why a store ended leases it did not expire: `failover` (a replica took over with a history
 * that may lack the last grants) or `restore` (the data came back from a copy).
 */
export type StoreLossReason = 'failover' | 'restore';

/** A store's answer to a release: `released`, or `not_owner` when the lease was not held. */
export type StoreReleaseResult = { readonly status: 'released' } | { readonly status: 'not_owner' };

/**
 * What a watch notification is known to be. `'granted'`: the store granted the key (it is held
 * now), so a waiter need not re-check, while an observer of the holder does. No value: a
 * release, an expiry, or a change the store cannot tell apart — the key may be free.
 */
export type WatchChange = 'granted';

/** Options of one {@link LeaseStore.watch}. */
export interface WatchOptions {
  /**
   * The watcher only observes (an election observer, an event stream): it never tries to
   * acquire when woken, so a store that wakes one local waiter per release (Redis with
   * `wakeOnRelease: 'one'`) tells it of every change and never counts it as that waiter.
   * Defaults to false.
   */
  readonly observer?: boolean;
}

/**
 * Stops a watch. Safe to call more than once. A store that wakes one local waiter per release
 * may add `queuedBehind`: whether another waiter of the key on this store would be woken
 * first. Such a waiter is woken in its turn, so its backstop poll need not ask the store.
 */
export type Unwatch = (() => void) & { readonly queuedBehind?: () => boolean };

/**
 * The lease contract every backend implements, and that `test/contract/` checks.
 *
 * - `tryAcquire` is one atomic step at the store: if the key is free, released or expired
 *   *by the store's clock*, it grants a token greater than every token ever granted (or
 *   reserved by a `tokenBlock`) for the key and an expiry of store-now + ttl (or longer, never shorter); otherwise it answers
 *   `busy` without writing anything. If the key's live holder has the same lease id, the
 *   store answers `acquired` with that holder's token (a retried request is idempotent).
 * - `renew` extends the lease only for the same key, lease id and token while unexpired;
 *   otherwise `lost`, for good.
 * - `release` is conditional on lease id and token, and keeps the token counter.
 * - A store that cannot answer **throws** (preferably `LeaseholdError('ERR_UNAVAILABLE')`);
 *   the client turns that into `unavailable`, never into `busy`.
 * - Inputs are validated by the client; stores may assume well-formed requests.
 */
export interface LeaseStore {
  /** A short name for logs and metrics labels: `memory`, `sqlite`, `postgres` … */
  readonly kind: string;
  readonly capabilities: StoreCapabilities;

  tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult>;
  renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult>;
  release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult>;

  /** The key's state for observers: last token, and the live holder if any. */
  inspect(key: string, options: StoreRequestOptions): Promise<LeaseState>;

  /** Keys with a live holder whose name starts with `prefix`, in key order, at most `limit`. */
  list(prefix: string, limit: number, options: StoreRequestOptions): Promise<LeaseState[]>;

  /**
   * Calls `onChange` (possibly spuriously, possibly coalesced) after anything that may have
   * freed or changed `key`: a release or an expiry the store notices (no argument), and every
   * grant made through this kind of store, by any process (`'granted'`, or no argument where
   * the store cannot tell a grant from a release). Resolves once the subscription is live, so
   * a caller that re-checks after it resolves misses neither a release nor a grant: waiters
   * are woken when the key may be free, and election observers see every leader. Stores
   * without notifications resolve at once and never call back (`capabilities.watch ===
   * 'none'`); waiters then rely on the holder's expiry and a poll.
   */
  watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch>;

  /** Releases connections and timers. Later calls throw `ERR_CLOSED`. */
  close(): Promise<void>;
}

/**
 * Options of one queued acquisition ({@link QueueingLeaseStore.acquireQueued}).
 *
 * `timeoutMs` is how long the caller is willing to wait in the queue (its remaining `wait`),
 * not a bound on one round trip: that is `requestTimeoutMs`. `signal` aborts the wait.
 */
export interface StoreQueuedOptions extends StoreRequestOptions {
  /** The bound on each store round trip the request makes (enqueue, re-check, clean-up). */
  readonly requestTimeoutMs: number;
  /**
   * The caller's monotonic clock. `validFrom` of a grant is one reading of it, so the caller
   * can place the lease's deadline on its own time scale.
   */
  now(): number;
  /**
   * While parked, re-check at least this often even without a notification: a backstop
   * against a lost notification, not the wake-up mechanism.
   */
  readonly pollIntervalMs: number;
  /**
   * Called each time the request is parked: its place in the queue is written at the store
   * and the notification that will wake it is live. For tests, benchmarks and metrics.
   */
  readonly onParked?: () => void;
}

/** The answer to a queued acquisition. */
export type StoreQueuedResult =
  | {
      readonly status: 'acquired';
      readonly token: Token;
      /**
       * A reading of `options.now()` taken **before** the store sent the request that
       * established the lease's validity (the one proving the holder's store-side lease
       * lives at least `ttl` from then). The caller's deadline is `validFrom + ttl − drift`,
       * exactly as for `tryAcquire` with the instant before sending.
       */
      readonly validFrom: number;
      /** The store's expiry as wall-clock ms, for display and history only. */
      readonly expiresAtWallMs?: number;
    }
  | { readonly status: 'busy'; readonly holder: HolderInfo; readonly retryAfterMs: number };

/**
 * An optional store capability: waiting in a queue kept **at the store**, so that waiters
 * of every process are served in arrival order, and a release wakes only the next waiter
 * (no thundering herd, no polling). The client uses it for `acquire` with `wait > 0`
 * instead of its own try / watch / re-check loop.
 *
 * The contract, beyond {@link LeaseStore.tryAcquire}'s:
 * - Waiters are granted in the order their places were written at the store. A waiter
 *   is granted only after a check, made after it reached the head of the queue, that its
 *   place still exists **and** that the store-side lease keeping it alive will last at
 *   least `ttl` from `validFrom` (the bug Jepsen found in etcd 3.4.3's lock: a waiter whose
 *   lease expired while it waited was granted anyway). A waiter whose place vanished while
 *   it waited is never granted on it: it queues again (a new, larger token) or answers.
 * - The granted lease is a normal lease: `renew` and `release` work on
 *   `{key, leaseId, token}`, also for a grant that arrives after the caller gave up.
 * - When `timeoutMs` runs out, the store removes the waiter's place (owner-checked, best
 *   effort: what it cannot remove must not outlive the waiter's own store-side lease) and
 *   answers `busy` with the holder; it may instead answer `acquired` when its final check
 *   finds the waiter at the head.
 * - When `signal` aborts, it removes the place the same way and rejects with
 *   `LeaseholdError('ERR_ABORTED')`. A store that cannot answer throws, as for `tryAcquire`.
 */
export interface QueueingLeaseStore {
  acquireQueued(
    request: StoreAcquireRequest,
    options: StoreQueuedOptions,
  ): Promise<StoreQueuedResult>;
}

/** True when `store` implements {@link QueueingLeaseStore}. */
export function isQueueingLeaseStore(store: LeaseStore): store is LeaseStore & QueueingLeaseStore {
  return typeof (store as Partial<QueueingLeaseStore>).acquireQueued === 'function';
}

/** One lease of a {@link BatchRenewingLeaseStore.renewMany} call: its identity and TTL. */
export type StoreRenewRequest = StoreLeaseRef & { readonly ttlMs: number };

/**
 * One lease's answer in a {@link BatchRenewingLeaseStore.renewMany} call: what `renew` would
 * answer, or `unanswered` when the store got an answer for this lease alone that a renewal
 * result cannot hold (the HTTP store: a 403 or a 5xx for this operation inside a batch that
 * the server otherwise answered). That lease's renewal failed as a `renew` that threw `error`
 * would have; the other leases of the call keep their own answers.
 */
export type StoreRenewManyResult =
  StoreRenewResult | { readonly status: 'unanswered'; readonly error: Error };

/**
 * Optional: a store that renews many leases in one round trip. The client sends every
 * renewal of its leases that falls due together as one call (one SQL statement, one script,
 * one HTTP batch) instead of one call per lease, so the store's load per renewal interval
 * does not grow with the number of leases held.
 *
 * The contract: `results[i]` answers `leases[i]`, exactly as `renew(leases[i])` would have
 * at some instant during the call — each lease's answer is its own (one lost lease never
 * fails the others), extension by the store's clock, `lost` for an expired or foreign lease.
 * The call throws only when the store could not answer at all; then no lease's outcome is
 * known, and each is treated as an unanswered renewal (`unavailable`). A key appears at most
 * once per call. An empty call answers `[]` without a round trip. One lease whose own answer is
 * an error (not the call's) is `unanswered` with that error, so one forbidden key cannot fail
 * the renewals of every lease it shares calls with.
 */
export interface BatchRenewingLeaseStore {
  renewMany(
    leases: readonly StoreRenewRequest[],
    options: StoreRequestOptions,
  ): Promise<readonly StoreRenewManyResult[]>;
}

/** True when `store` implements {@link BatchRenewingLeaseStore}. */
export function isBatchRenewingLeaseStore(
  store: LeaseStore,
): store is LeaseStore & BatchRenewingLeaseStore {
  return typeof (store as Partial<BatchRenewingLeaseStore>).renewMany === 'function';
}

/** What {@link HandOffLeaseStore.releaseAndAcquire} did: the release, then the acquire attempt. */
export interface StoreHandOffResult {
  readonly released: StoreReleaseResult['status'];
  readonly acquired: StoreAcquireResult;
}

/**
 * Optional: a store that can release one lease and attempt another acquisition of the same
 * key in one atomic step. The client uses it to pass a key straight from a releasing lease to
 * a waiter in the same client — one round trip instead of a release, a notification and a
 * re-check. The result is exactly what `release(release)` followed at once by
 * `tryAcquire(acquire)` would give, with nothing else in between: the grant obeys every
 * `tryAcquire` rule (a token above every earlier one, expiry from the store's clock), and a
 * failed release (`not_owner`) still leads to an ordinary attempt, which is `busy` when
 * another lease holds the key. Watchers are told as after a grant. `acquire.key` always equals
 * `release.key`.
 */
export interface HandOffLeaseStore extends LeaseStore {
  releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreHandOffResult>;
}

/** True when `store` implements {@link HandOffLeaseStore}. */
export function canHandOff(store: LeaseStore): store is HandOffLeaseStore {
  return typeof (store as Partial<HandOffLeaseStore>).releaseAndAcquire === 'function';
}
