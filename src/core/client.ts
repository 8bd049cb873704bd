import { abortReason, MonotonicGuard, systemClock, type Clock } from './clock.js';
import { TimeoutQueue } from './timeout-queue.js';
import type { Duration } from './duration.js';
import { invalidArgument, isLeaseholdError, LeaseholdError } from './errors.js';
import {
  debugEnabled,
  LeaseEvents,
  silentLogger,
  type LeaseEventOf,
  type LeaseEventType,
  type Logger,
} from './events.js';
import { defaultOwnerId, leaseIdPrefix, newLeaseId } from './ids.js';
import { nodeProcess } from './platform.js';
import { Lease } from './lease.js';
import { boundedRequest, isProgrammerError } from './request.js';
import type { AcquireResult, LossReason, ReleaseResult } from './results.js';
import {
  canHandOff,
  isQueueingLeaseStore,
  type HandOffLeaseStore,
  type LeaseStore,
  type QueueingLeaseStore,
  type StoreAcquireRequest,
  type StoreAcquireResult,
} from './store.js';
import type { LeaseState, Token } from './types.js';
import {
  checkSignal,
  LIMITS,
  validateKey,
  validateOwnerId,
  validatePrefix,
  validateRenewEvery,
  validateTimeout,
  validateTtl,
  validateValue,
  validateWait,
} from './validate.js';
import { Wakeup } from './wakeup.js';
import { linkSignals } from './signals.js';
import { KeyWaiters, Waiter, type HandOffRequest } from './key-waiters.js';

/** Options for {@link LeaseClient}. */
export interface LeaseClientOptions {
  /** The lease authority. The client never closes it; you do. */
  readonly store: LeaseStore;
  /** Who this client is, for holders' info and logs. Defaults to `host/pid/random`. */
  readonly ownerId?: string;
  /** Monotonic time and timers. Defaults to `performance.now()` and Node timers. */
  readonly clock?: Clock;
  /**
   * The fraction of the TTL assumed lost to clock-rate differences between this machine and
   * the store; each deadline is shortened by `ceil(ttl × ratio) + 2ms`. Defaults to 0.01.
   */
  readonly clockDriftRatio?: number;
  /** Timeout for acquire, release and inspect requests. Defaults to `'5s'`. */
  readonly requestTimeout?: Duration;
  /**
   * While waiting, how often to re-check without a notification: only a backstop. Defaults
   * to `'2s'` on stores with push notifications, `'250ms'` on stores without.
   */
  readonly pollInterval?: Duration;
  /** A pino-compatible logger. Defaults to silent. */
  readonly logger?: Logger;
  /** Random numbers in [0, 1) for jitter. Defaults to `Math.random`. */
  readonly random?: () => number;
  /**
   * On stores that can release and acquire in one step (memory, SQLite, Redis), a lease of
   * this client that is released while another acquisition of this client waits for the key
   * passes it straight to that waiter: one round trip, no notification. This many times in a
   * row at most; then one ordinary release lets waiters in other processes compete. 0 turns
   * hand-off off (strict release-then-compete). Defaults to 16.
   */
  readonly maxHandOffRun?: number;
  /**
   * On stores with token blocks (`capabilities.tokenBlocks`: memory, SQLite, PostgreSQL, Redis,
   * and HTTP when the server's store has them; not etcd), each store grant
   * reserves this many more tokens, and a lease released while another acquisition of this
   * client waits for the key (same TTL and value, waiting since before the store lease's
   * grant or last confirmed renewal was sent) passes to that waiter **without a store
   * call**: the waiter's lease acts under the same store lease (same lease id, expiry and
   * renewals) with the next token of the block, so every holder still has a larger token
   * than every one issued before it began waiting — even if the store's clock jumps — and
   * fences work unchanged (decision 007). Counts toward `maxHandOffRun`. From 0 to 63;
   * defaults to 0 (off: every holder is a store grant).
   */
  readonly localSuccessors?: number;
}

/** Options for one {@link LeaseClient.acquire}. */
export interface AcquireOptions {
  /** How long the store keeps the lease without renewal (100ms–24h). Required. */
  readonly ttl: Duration;
  /** How long to wait for a busy key (0–24h). Defaults to 0: answer `busy` at once. */
  readonly wait?: Duration;
  /** Cancels a waiting acquire (throws `ERR_ABORTED`); a grant that arrives late is released. */
  readonly signal?: AbortSignal;
  /** A small value stored with the lease (≤ 1 KiB), e.g. a leader's address. Defaults to none. */
  readonly value?: string;
  /** Renew in the background while held. Defaults to true. */
  readonly autoRenew?: boolean;
  /** Background renewal cadence, below the TTL. Defaults to a third of the TTL. */
  readonly renewEvery?: Duration;
}

/** The outcome of {@link LeaseClient.withLease}. */
export type WithLeaseResult<T> =
  /** `fn` returned while the lease was still valid. */
  | { readonly status: 'completed'; readonly value: T; readonly token: Token }
  /** `fn` returned, but the lease was lost while it ran: its unfenced effects may be stale. */
  | {
      readonly status: 'lost';
      readonly value: T;
      readonly token: Token;
      readonly reason: LossReason;
    }
  | Exclude<AcquireResult, { status: 'acquired' }>;

/** The defaults of {@link LeaseClientOptions}. */
export const CLIENT_DEFAULTS = Object.freeze({
  clockDriftRatio: 0.01,
  clockDriftFixedMs: 2,
  requestTimeoutMs: 5000,
  pollIntervalPushMs: 2000,
  pollIntervalNoneMs: 250,
  maxHandOffRun: 16,
  localSuccessors: 0,
});

interface ResolvedAcquire {
  readonly key: string;
  readonly ttlMs: number;
  readonly waitMs: number;
  readonly driftMs: number;
  readonly renewEveryMs: number | undefined;
  readonly value: string | undefined;
  readonly signal: AbortSignal | undefined;
}

/**
 * Acquires leases from a {@link LeaseStore}. One client per process and store is typical;
 * it is cheap, holds no connection of its own, and may hold many leases at once.
 *
 * @example
 * import { LeaseClient } from 'leasehold';
 * import { SqliteLeaseStore } from 'leasehold/sqlite';
 *
 * const client = new LeaseClient({ store: new SqliteLeaseStore({ path: './leasehold.db' }) });
 * const result = await client.acquire('report/july', { ttl: '30s', wait: '5s' });
 * switch (result.status) {
 *   case 'acquired': {
 *     await using lease = result.lease;
 *     await publish(report, { token: lease.token, signal: lease.signal });
 *     break;
 *   }
 *   case 'busy': console.log('held by', result.holder.ownerId); break;
 *   case 'unavailable': console.error('store unreachable', result.cause); break;
 * }
 */
export class LeaseClient {
  readonly ownerId: string;
  readonly store: LeaseStore;
  private readonly clock: Clock;
  /** The timeouts of this client's store requests, its leases' included. */
  private readonly timeouts: TimeoutQueue;
  /** Its leases' renewal and deadline timers. */
  private readonly leaseTimers: TimeoutQueue;
  private readonly guard: MonotonicGuard;
  private readonly driftRatio: number;
  private readonly requestTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly logger: Logger;
  private readonly debugLogs: boolean;
  private readonly random: () => number;
  private readonly events: LeaseEvents;
  // Held leases: an array in which each lease knows its slot (swap-remove on settle). Not a
  // dictionary by lease id: a fresh lease id as a property key is internalised into V8's
  // string table, about 1 µs per lease; not a Set: a long-lived V8 Set or Map with an add and
  // a delete per lease kept the deleted entries until it rehashed, so every lease survived
  // young-generation collections and was promoted.
  private readonly held: Lease[] = [];
  /** The live lease of this client on each key (a store has one holder per key). */
  private readonly heldByKey: Record<string, Lease> = Object.create(null) as Record<string, Lease>;
  private readonly maxHandOffRun: number;
  /** Tokens each store grant reserves: 1 + local successors, 1 when the store cannot. */
  private readonly tokenBlock: number;
  private readonly handOffHook = (
    lease: Lease,
  ): Promise<ReleaseResult> | (() => void) | undefined => this.handOff(lease);
  private readonly onLeaseSettled = (lease: Lease): void => {
    const slot = lease.heldSlot;
    if (slot >= 0) {
      const last = this.held.pop()!;
      if (last !== lease) {
        this.held[slot] = last;
        last.heldSlot = slot;
      }
      lease.heldSlot = -1;
    }
    // A lease being handed off stays the key's holder until the hand-off answers.
    if (this.heldByKey[lease.key] === lease && !lease.handingOff) {
      delete this.heldByKey[lease.key];
    }
  };
  private readonly waiting = new Map<string, KeyWaiters>();
  private readonly closing = new AbortController();

  constructor(options: LeaseClientOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    const store = options.store as LeaseStore | undefined;
    if (store === undefined || typeof store.tryAcquire !== 'function') {
      throw invalidArgument('store', 'must be a LeaseStore', store);
    }
    this.store = store;
    this.ownerId =
      options.ownerId === undefined ? defaultOwnerId() : validateOwnerId(options.ownerId);
    this.clock = options.clock ?? systemClock;
    this.guard = new MonotonicGuard(this.clock);
    this.timeouts = new TimeoutQueue(this.clock);
    this.leaseTimers = new TimeoutQueue(this.clock, { background: true });
    const ratio = options.clockDriftRatio ?? CLIENT_DEFAULTS.clockDriftRatio;
    if (typeof ratio !== 'number' || !(ratio >= 0 && ratio < 0.5)) {
      throw invalidArgument('clockDriftRatio', 'must be a number in [0, 0.5)', ratio);
    }
    this.driftRatio = ratio;
    this.requestTimeoutMs =
      options.requestTimeout === undefined
        ? CLIENT_DEFAULTS.requestTimeoutMs
        : validateTimeout(options.requestTimeout, 'requestTimeout');
    this.pollIntervalMs =
      options.pollInterval === undefined
        ? store.capabilities.watch === 'push'
          ? CLIENT_DEFAULTS.pollIntervalPushMs
          : CLIENT_DEFAULTS.pollIntervalNoneMs
        : validateTimeout(options.pollInterval, 'pollInterval');
    this.logger = options.logger ?? silentLogger;
    this.debugLogs = debugEnabled(this.logger);
    this.random = options.random ?? Math.random;
    const run = options.maxHandOffRun ?? CLIENT_DEFAULTS.maxHandOffRun;
    if (!Number.isInteger(run) || run < 0 || run > 1_000_000) {
      throw invalidArgument('maxHandOffRun', 'must be an integer from 0 to 1000000', run);
    }
    this.maxHandOffRun = run;
    const successors = options.localSuccessors ?? CLIENT_DEFAULTS.localSuccessors;
    if (!Number.isInteger(successors) || successors < 0 || successors >= LIMITS.maxTokenBlock) {
      throw invalidArgument(
        'localSuccessors',
        `must be an integer from 0 to ${LIMITS.maxTokenBlock - 1}`,
        successors,
      );
    }
    this.tokenBlock = store.capabilities.tokenBlocks === true ? successors + 1 : 1;
    this.events = new LeaseEvents(this.logger);
    // Every pending acquire listens on the close signal; many at once is normal, not a leak.
    nodeProcess()?.getBuiltinModule('node:events').setMaxListeners(0, this.closing.signal);
  }

  /** Subscribes to lease events (`'*'` for all). Returns an unsubscribe function. */
  on<T extends LeaseEventType>(
    type: T | '*',
    listener: (event: LeaseEventOf<T>) => void,
  ): () => void {
    return this.events.on(type, listener);
  }

  /** The current monotonic time on the client's clock, the scale of every `deadline`. */
  now(): number {
    return this.guard.now();
  }

  /** Leases this client holds right now. */
  heldLeases(): readonly Lease[] {
    return [...this.held];
  }

  /**
   * Acquires `key` for `ttl`, waiting up to `wait` for a busy key. Returns `acquired` with a
   * {@link Lease}, `busy` with the holder, or `unavailable` when the store cannot answer —
   * never throws for those. Throws `ERR_INVALID_ARGUMENT` for bad arguments (nothing is
   * sent), `ERR_ABORTED` when `signal` fires, `ERR_CLOSED` after {@link close}.
   */
  async acquire(key: string, options: AcquireOptions): Promise<AcquireResult> {
    this.assertOpen();
    const req = this.resolveAcquire(key, options);
    const linked = req.signal ? linkSignals([req.signal, this.closing.signal]) : undefined;
    const signal = linked?.signal ?? this.closing.signal;
    const startedAt = this.guard.now();
    if (req.waitMs > 0 && isQueueingLeaseStore(this.store)) {
      try {
        return await this.acquireQueued(this.store, req, signal, startedAt);
      } finally {
        linked?.dispose();
      }
    }
    const waitUntil = startedAt + req.waitMs;
    let waiter: Waiter | undefined;
    let queue: KeyWaiters | undefined;
    let returned: Lease | undefined;
    try {
      for (;;) {
        if (signal.aborted) throw this.abortError(signal);
        if (waiter?.lease !== undefined) {
          returned = waiter.lease;
          return { status: 'acquired', lease: returned, waitedMs: this.guard.now() - startedAt };
        }
        let busy: Extract<StoreAcquireResult, { status: 'busy' }> | undefined;
        if (waiter?.claimed !== true) {
          // While a lease of this client holds the key, the store can only answer busy: a
          // waiting acquire joins the queue without asking (its turn comes by hand-off).
          busy = req.waitMs > 0 ? this.localHolder(req.key) : undefined;
          if (busy === undefined) {
            const attempt = await this.attempt(req, signal, startedAt);
            if (attempt.kind === 'done') {
              if (attempt.result.status !== 'acquired') return attempt.result;
              returned = attempt.result.lease;
              return { ...attempt.result, waitedMs: this.guard.now() - startedAt };
            }
            busy = attempt.busy;
          }
        }
        const now = this.guard.now();
        const left = waitUntil - now;
        if (busy !== undefined && left <= 0) {
          this.events.emit({
            type: 'busy',
            key: req.key,
            ownerId: this.ownerId,
            holder: busy.holder,
            waitedMs: now - startedAt,
          });
          return { status: 'busy', holder: busy.holder, retryAfterMs: busy.retryAfterMs };
        }
        if (queue === undefined || waiter === undefined) {
          waiter = new Waiter(new Wakeup(this.clock), req, startedAt);
          queue = this.waitersFor(req.key);
          queue.join(waiter);
          const q = queue;
          const w = await q.subscribe(() =>
            boundedRequest(this.timeouts, this.requestTimeoutMs, this.closing.signal, () =>
              this.store.watch(req.key, q.notifyHead),
            ),
          );
          if (!w.ok && !w.aborted) {
            this.logger.warn(
              { key: req.key, err: String(w.error) },
              'watch failed; waiting by expiry timer and poll',
            );
          }
          // The head re-checks once the subscription is live, so a release in between is not
          // missed; the others wait their turn (re-checking too would let them overtake it).
          if (queue.isHead(waiter)) continue;
        }
        let sleep: number;
        if (busy === undefined) {
          // A hand-off to this waiter is in flight; its outcome wakes us (bounded anyway).
          sleep = this.requestTimeoutMs;
        } else {
          const poll = Math.floor(this.pollIntervalMs * (0.8 + 0.4 * this.random()));
          sleep = Math.min(left, poll);
          if (queue.isHead(waiter)) {
            const jitter = Math.floor(this.random() * Math.min(5, busy.retryAfterMs * 0.05 + 1));
            sleep = Math.min(sleep, busy.retryAfterMs + 1 + jitter);
          }
        }
        const why = await waiter.wakeup.wait(Math.max(1, sleep), signal);
        if (why === 'aborted') throw this.abortError(signal);
      }
    } finally {
      if (waiter !== undefined) {
        // A hand-off still in flight, or delivered just as we gave up, is released.
        waiter.gone = true;
        if (waiter.lease !== undefined && waiter.lease !== returned) void waiter.lease.release();
        queue?.leave(waiter, returned !== undefined);
      }
      linked?.dispose();
    }
  }

  /** A busy answer made from this client's own live lease on `key`, if it holds one. */
  private localHolder(key: string): Extract<StoreAcquireResult, { status: 'busy' }> | undefined {
    const lease = this.heldByKey[key];
    if (lease === undefined) return undefined;
    // A lease being handed off is released locally but holds at the store until the hand-off
    // answers, and then its waiter holds: busy either way.
    const remainingMs = lease.handingOff ? lease.ttlMs : lease.remainingMs();
    if (remainingMs <= 0) return undefined;
    return {
      status: 'busy',
      holder: {
        ownerId: lease.ownerId,
        token: lease.token,
        remainingMs,
        leaseIdPrefix: leaseIdPrefix(lease.leaseId),
        value: lease.value,
      },
      retryAfterMs: remainingMs,
    };
  }

  /**
   * Called by a lease of this client as it is released, when another acquisition of this
   * client waits for the same key: the key goes to that waiter under the same store lease
   * with the next token of its block (local succession, no store call; a function to run once
   * the release is reported), or when the store can, in one atomic release-and-acquire.
   * Undefined means "release as usual".
   */
  private handOff(lease: Lease): Promise<ReleaseResult> | (() => void) | undefined {
    if (this.maxHandOffRun === 0 || this.closing.signal.aborted) return undefined;
    const spare = lease.blockEnd > lease.token;
    if (!spare && !canHandOff(this.store)) return undefined;
    const queue = this.waiting.get(lease.key);
    const waiter = queue?.claimHead(this.maxHandOffRun);
    if (queue === undefined || waiter === undefined) return undefined;
    if (spare) {
      const succeed = this.localSuccession(lease, waiter);
      if (succeed !== undefined) return succeed;
    }
    if (!canHandOff(this.store)) {
      queue.unclaim(waiter);
      return undefined;
    }
    lease.handingOff = true;
    this.heldByKey[lease.key] = lease;
    return this.transfer(this.store, lease, waiter).finally(() => {
      lease.handingOff = false;
      if (this.heldByKey[lease.key] === lease) delete this.heldByKey[lease.key];
    });
  }

  /**
   * The grant of `lease`'s next token to `waiter` under the same store lease, or undefined
   * when the waiter asked for another TTL or value (the store's record would not match), less
   * than half the lease's window is left (a store grant would give it a whole one), or the
   * waiter started waiting after the request that last proved the store lease live was sent.
   */
  private localSuccession(lease: Lease, waiter: Waiter): (() => void) | undefined {
    const req = waiter.request;
    if (req.ttlMs !== lease.ttlMs || req.value !== lease.value) return undefined;
    // The store lease was live at the store at some instant after `validFrom` (its grant or
    // last confirmed renewal was sent then). A waiter that began before `validFrom` may take
    // the next token: every acquisition that completed before it began was granted before
    // the store lease (or is an earlier holder of its block), so its token is smaller. A
    // later waiter may not: the store's clock can jump and expire the store lease at any
    // moment, and a larger token may already have been granted to someone else (decision
    // 007, "Clock faults"). Both readings are of this client's monotonic clock, so their
    // order is real-time order whatever any clock's rate; strict, because two equal readings
    // do not say which came first.
    if (!(waiter.startedAt < lease.validFrom)) return undefined;
    let now: number;
    try {
      now = this.guard.now();
    } catch {
      return undefined;
    }
    if (lease.deadline - now < (req.ttlMs - req.driftMs) / 2) return undefined;
    return () => {
      waiter.claimed = false;
      const successor = this.grant(
        req,
        lease.leaseId,
        lease.token + 1n,
        lease.validFrom,
        waiter.startedAt,
        {
          storeToken: lease.storeToken,
          blockEnd: lease.blockEnd,
          grantedAt: now,
        },
      );
      if (successor === undefined) {
        // Cannot happen within one synchronous step (half a window was left); never leak it.
        this.releaseLateGrant(
          req.key,
          lease.leaseId,
          Promise.resolve({ status: 'acquired', token: lease.storeToken }),
        );
      } else if (waiter.gone) {
        void successor.release();
      } else {
        waiter.lease = successor;
      }
      waiter.wakeup.notify();
    };
  }

  private async transfer(
    store: HandOffLeaseStore,
    from: Lease,
    waiter: Waiter,
  ): Promise<ReleaseResult> {
    const req = waiter.request;
    const leaseId = newLeaseId();
    const sentAt = this.guard.now();
    const windowMs = req.ttlMs - req.driftMs;
    const settled = await boundedRequest(
      this.timeouts,
      Math.max(1, Math.min(this.requestTimeoutMs, windowMs)),
      undefined,
      (o) =>
        store.releaseAndAcquire(
          { key: from.key, leaseId: from.leaseId, token: from.storeToken },
          this.storeRequest(req, leaseId),
          o,
        ),
      (late) =>
        this.releaseLateGrant(
          req.key,
          leaseId,
          late.then((r) => r.acquired),
        ),
    );
    waiter.claimed = false;
    if (!settled.ok) {
      waiter.wakeup.notify();
      if (isProgrammerError(settled.error)) throw settled.error;
      return { status: 'unavailable', cause: settled.error };
    }
    const { released, acquired } = settled.value;
    if (acquired.status === 'acquired') {
      const lease = this.grant(req, leaseId, acquired.token, sentAt, waiter.startedAt);
      if (lease === undefined) {
        this.releaseLateGrant(req.key, leaseId, Promise.resolve(acquired));
      } else if (waiter.gone) {
        void lease.release();
      } else {
        waiter.lease = lease;
      }
    }
    waiter.wakeup.notify();
    return { status: released };
  }

  private waitersFor(key: string): KeyWaiters {
    let queue = this.waiting.get(key);
    if (queue === undefined) {
      const created = new KeyWaiters(() => {
        if (this.waiting.get(key) === created) this.waiting.delete(key);
      });
      this.waiting.set(key, created);
      queue = created;
    }
    return queue;
  }

  /**
   * Runs `fn` under a lease on `key`: acquires (waiting if `wait` is set), renews while `fn`
   * runs, and releases in every outcome — return, throw or abort. `fn` receives the lease and
   * a signal that fires when the lease is lost or the caller's `signal` aborts.
   */
  async withLease<T>(
    key: string,
    options: AcquireOptions,
    fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<WithLeaseResult<T>> {
    const acquired = await this.acquire(key, options);
    if (acquired.status !== 'acquired') return acquired;
    const { lease } = acquired;
    const linked = options.signal ? linkSignals([lease.signal, options.signal]) : undefined;
    const signal = linked?.signal ?? lease.signal;
    try {
      const value = await fn(lease, signal);
      if (lease.isValid()) return { status: 'completed', value, token: lease.token };
      return { status: 'lost', value, token: lease.token, reason: lease.lossReason ?? 'expired' };
    } finally {
      linked?.dispose();
      await lease.release();
    }
  }

  /** The key's state: its last token and live holder. Throws `ERR_UNAVAILABLE` if the store cannot answer. */
  async inspect(key: string): Promise<LeaseState> {
    this.assertOpen();
    const k = validateKey(key);
    return this.unwrap(
      await boundedRequest(this.timeouts, this.requestTimeoutMs, undefined, (o) =>
        this.store.inspect(k, o),
      ),
    );
  }

  /** Live leases whose key starts with `prefix`, in key order (at most `limit`, default 1000). */
  async list(prefix = '', options: { limit?: number } = {}): Promise<LeaseState[]> {
    this.assertOpen();
    const p = validatePrefix(prefix);
    const limit = options.limit ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
      throw invalidArgument('limit', 'must be an integer from 1 to 10000', limit);
    return this.unwrap(
      await boundedRequest(this.timeouts, this.requestTimeoutMs, undefined, (o) =>
        this.store.list(p, limit, o),
      ),
    );
  }

  /**
   * Stops the client: waiting acquisitions throw `ERR_CLOSED`, and held leases end (their
   * signals fire) and are released at the store. Does not close the store.
   */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new LeaseholdError('ERR_CLOSED', 'the lease client was closed'));
    const leases = [...this.held];
    await Promise.all(leases.map((l) => l.release()));
    this.timeouts.trim();
    this.leaseTimers.trim();
  }

  private async attempt(
    req: ResolvedAcquire,
    signal: AbortSignal,
    startedAt: number,
  ): Promise<
    | { kind: 'done'; result: AcquireResult }
    | { kind: 'busy'; busy: Extract<StoreAcquireResult, { status: 'busy' }> }
  > {
    const leaseId = newLeaseId();
    const sentAt = this.guard.now();
    const windowMs = req.ttlMs - req.driftMs;
    // An answer later than the lease's usable window is worthless, so wait no longer than that.
    const timeoutMs = Math.max(1, Math.min(this.requestTimeoutMs, windowMs));
    const settled = await boundedRequest(
      this.timeouts,
      timeoutMs,
      signal,
      (o) => this.store.tryAcquire(this.storeRequest(req, leaseId), o),
      (late) => this.releaseLateGrant(req.key, leaseId, late),
    );
    if (!settled.ok) {
      if (settled.aborted) throw this.abortError(signal);
      if (isProgrammerError(settled.error)) throw settled.error;
      return { kind: 'done', result: this.unavailable(req.key, settled.error) };
    }
    const answer = settled.value;
    if (answer.status === 'busy') return { kind: 'busy', busy: answer };
    const lease = this.grant(req, leaseId, answer.token, sentAt, startedAt);
    if (lease === undefined) {
      this.releaseLateGrant(req.key, leaseId, Promise.resolve(answer));
      return {
        kind: 'done',
        result: this.unavailable(
          req.key,
          new LeaseholdError(
            'ERR_UNAVAILABLE',
            `the grant arrived after the lease's local deadline (${Math.round(this.guard.now() - sentAt)}ms)`,
          ),
        ),
      };
    }
    return { kind: 'done', result: { status: 'acquired', lease, waitedMs: 0 } };
  }

  /**
   * Makes the Lease for a grant whose request was sent at `sentAt`, or undefined when the
   * answer came too late to leave any validity (the caller releases it).
   */
  private grant(
    req: HandOffRequest,
    leaseId: string,
    token: Token,
    sentAt: number,
    startedAt: number,
    under?: { readonly storeToken: Token; readonly blockEnd: Token; readonly grantedAt: number },
  ): Lease | undefined {
    if (typeof token !== 'bigint' || token < 1n || token > LIMITS.maxToken) {
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `store ${this.store.kind} granted an invalid token ${String(token)}`,
      );
    }
    const now = this.guard.now();
    if (now >= sentAt + req.ttlMs - req.driftMs) return undefined;
    const lease = new Lease({
      store: this.store,
      timeouts: this.timeouts,
      leaseTimers: this.leaseTimers,
      guard: this.guard,
      events: this.events,
      logger: this.logger,
      key: req.key,
      leaseId,
      ownerId: this.ownerId,
      token,
      // A store grant reserved `tokenBlock` tokens (the store checked they fit in int64).
      blockEnd:
        under?.blockEnd ?? (this.tokenBlock > 1 ? token + BigInt(this.tokenBlock - 1) : token),
      ...(under === undefined ? {} : { storeToken: under.storeToken, grantedAt: under.grantedAt }),
      value: req.value,
      ttlMs: req.ttlMs,
      driftMs: req.driftMs,
      sentAt,
      renewEveryMs: req.renewEveryMs,
      requestTimeoutMs: this.requestTimeoutMs,
      handOff: this.handOffHook,
      onSettled: this.onLeaseSettled,
    });
    lease.heldSlot = this.held.length;
    this.held.push(lease);
    this.heldByKey[req.key] = lease;
    if (this.events.active) {
      this.events.emit({
        type: 'acquired',
        key: req.key,
        ownerId: this.ownerId,
        token,
        leaseIdPrefix: leaseIdPrefix(leaseId),
        waitedMs: now - startedAt,
      });
    }
    if (this.debugLogs) {
      this.logger.debug(
        { key: req.key, token: token.toString(), lease: leaseIdPrefix(leaseId) },
        'lease acquired',
      );
    }
    return lease;
  }

  /**
   * Waiting on a store that keeps the queue itself ({@link QueueingLeaseStore}): one call
   * that the store answers when the key is ours or the wait is over. The lease's deadline
   * is measured from the store's `validFrom`, a reading of our clock taken before the
   * request that proved the lease valid.
   */
  private async acquireQueued(
    store: LeaseStore & QueueingLeaseStore,
    req: ResolvedAcquire,
    signal: AbortSignal,
    startedAt: number,
  ): Promise<AcquireResult> {
    if (signal.aborted) throw this.abortError(signal);
    const leaseId = newLeaseId();
    const windowMs = req.ttlMs - req.driftMs;
    const calledAt = this.guard.now();
    const waitMs = Math.max(0, startedAt + req.waitMs - calledAt);
    // A round trip answered later than the lease's usable window is worthless.
    const requestTimeoutMs = Math.max(1, Math.min(this.requestTimeoutMs, windowMs));
    // The store ends the wait itself; the slack covers its final check and clean-up.
    const settled = await boundedRequest(
      this.timeouts,
      waitMs + 3 * requestTimeoutMs,
      signal,
      (o) =>
        store.acquireQueued(this.storeRequest(req, leaseId), {
          timeoutMs: waitMs,
          signal: o.signal,
          requestTimeoutMs,
          now: () => this.guard.now(),
          pollIntervalMs: this.pollIntervalMs,
        }),
      (late) => this.releaseLateGrant(req.key, leaseId, late),
    );
    if (!settled.ok) {
      if (settled.aborted || signal.aborted) throw this.abortError(signal);
      if (isProgrammerError(settled.error)) throw settled.error;
      return this.unavailable(req.key, settled.error);
    }
    const answer = settled.value;
    const now = this.guard.now();
    if (answer.status === 'busy') {
      this.events.emit({
        type: 'busy',
        key: req.key,
        ownerId: this.ownerId,
        holder: answer.holder,
        waitedMs: now - startedAt,
      });
      return { status: 'busy', holder: answer.holder, retryAfterMs: answer.retryAfterMs };
    }
    if (typeof answer.token !== 'bigint' || answer.token < 1n || answer.token > LIMITS.maxToken) {
      this.releaseLateGrant(req.key, leaseId, Promise.resolve(answer));
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `store ${this.store.kind} granted an invalid token ${String(answer.token)}`,
      );
    }
    const validFrom = answer.validFrom;
    if (typeof validFrom !== 'number' || !(validFrom >= calledAt && validFrom <= now)) {
      this.releaseLateGrant(req.key, leaseId, Promise.resolve(answer));
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `store ${this.store.kind} answered validFrom ${String(validFrom)} outside its call [${calledAt}, ${now}]`,
      );
    }
    const lease = this.grant(req, leaseId, answer.token, validFrom, startedAt);
    if (lease === undefined) {
      this.releaseLateGrant(req.key, leaseId, Promise.resolve(answer));
      return this.unavailable(
        req.key,
        new LeaseholdError(
          'ERR_UNAVAILABLE',
          `the grant arrived after the lease's local deadline (${Math.round(now - validFrom)}ms)`,
        ),
      );
    }
    const waitedMs = now - startedAt;
    return { status: 'acquired', lease, waitedMs };
  }

  /** The store request for one acquisition, with the token block when local succession is on. */
  private storeRequest(req: HandOffRequest, leaseId: string): StoreAcquireRequest {
    const r = { key: req.key, leaseId, ownerId: this.ownerId, ttlMs: req.ttlMs, value: req.value };
    return this.tokenBlock > 1 ? { ...r, tokenBlock: this.tokenBlock } : r;
  }

  /** A grant the caller will never see (timed out, aborted, too late) is released, not leaked. */
  private releaseLateGrant(key: string, leaseId: string, late: Promise<StoreAcquireResult>): void {
    late
      .then(
        async (answer) => {
          if (answer.status !== 'acquired') return;
          this.logger.info(
            { key, lease: leaseIdPrefix(leaseId), token: answer.token.toString() },
            'releasing a grant that arrived too late',
          );
          await boundedRequest(this.timeouts, this.requestTimeoutMs, undefined, (o) =>
            this.store.release({ key, leaseId, token: answer.token }, o),
          );
        },
        () => undefined,
      )
      .catch(() => undefined);
  }

  private unavailable(key: string, cause: unknown): AcquireResult {
    this.events.emit({ type: 'unavailable', key, ownerId: this.ownerId, cause });
    this.logger.warn({ key, err: String(cause) }, 'lease store unavailable');
    return { status: 'unavailable', cause };
  }

  private resolveAcquire(key: unknown, options: AcquireOptions): ResolvedAcquire {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object with a ttl', options);
    const k = validateKey(key);
    const ttlMs = validateTtl(options.ttl, this.store.capabilities.minTtlMs);
    const waitMs = validateWait(options.wait);
    const value = validateValue(options.value);
    const driftMs = Math.ceil(ttlMs * this.driftRatio) + CLIENT_DEFAULTS.clockDriftFixedMs;
    const windowMs = ttlMs - driftMs;
    if (options.autoRenew !== undefined && typeof options.autoRenew !== 'boolean') {
      throw invalidArgument('autoRenew', 'must be a boolean', options.autoRenew);
    }
    let renewEveryMs: number | undefined;
    if (options.autoRenew !== false) {
      renewEveryMs =
        options.renewEvery === undefined
          ? Math.floor(ttlMs / 3)
          : validateRenewEvery(options.renewEvery, ttlMs, windowMs);
    } else if (options.renewEvery !== undefined) {
      throw invalidArgument(
        'renewEvery',
        'cannot be set when autoRenew is false',
        options.renewEvery,
      );
    }
    const signal = checkSignal(options.signal);
    return { key: k, ttlMs, waitMs, driftMs, renewEveryMs, value, signal };
  }

  private abortError(signal: AbortSignal): LeaseholdError {
    if (this.closing.signal.aborted) {
      return new LeaseholdError('ERR_CLOSED', 'the lease client was closed');
    }
    return abortReason(signal);
  }

  private assertOpen(): void {
    if (this.closing.signal.aborted)
      throw new LeaseholdError('ERR_CLOSED', 'the lease client was closed');
  }

  private unwrap<T>(settled: { ok: true; value: T } | { ok: false; error: unknown }): T {
    if (settled.ok) return settled.value;
    if (isLeaseholdError(settled.error)) throw settled.error;
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `store ${this.store.kind} could not answer: ${String(settled.error)}`,
      { cause: settled.error },
    );
  }
}
