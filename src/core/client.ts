import { attemptAcquire, busyResult } from './acquire-attempt.js';
import { ClientContext } from './client-context.js';
import {
  resolveAcquire,
  resolveClientOptions,
  type AcquireOptions,
  type AcquireOptionsWithoutFences,
  type FencedWithLeaseResult,
  type LeaseClientOptions,
  type ResolvedAcquire,
  type WithLeaseResult,
} from './client-options.js';
import { claimFences, resolveFences, type ResolvedClaim } from './fence-claim.js';
import { invalidArgument } from './errors.js';
import type { LeaseEventOf, LeaseEventType } from './events.js';
import { HandOffs } from './hand-off.js';
import { HeldLeases } from './held-leases.js';
import { WaitQueues } from './key-waiters.js';
import type { Lease } from './lease.js';
import type { AcquireResult, FencedAcquireResult } from './results.js';
import { boundedRequest, unwrapSettled } from './runtime/request.js';
import { linkSignals } from './runtime/signals.js';
import { isQueueingLeaseStore, type LeaseStore } from './store.js';
import { acquireQueued } from './store-queue.js';
import {
  acquireSlot,
  resolveSlotAcquire,
  type AcquireSlotOptions,
  type AcquireSlotOptionsWithoutFences,
  type FencedSlotAcquireResult,
  type SlotAcquireResult,
  type SlotLease,
} from './semaphore.js';
import type { LeaseState } from './types.js';
import { validateKey, validatePrefix } from './validate.js';
import { waitForKey, type WaitTurn } from './wait-loop.js';
import * as sets from './lease-set.js';

export { CLIENT_DEFAULTS } from './client-options.js';
export type {
  AcquireOptions,
  AcquireOptionsWithoutFences,
  FencedWithLeaseResult,
  LeaseClientOptions,
  WithLeaseResult,
} from './client-options.js';

const PENDING: WaitTurn<AcquireResult> = Object.freeze({ kind: 'pending' });

function acquiredTurn(result: AcquireResult): WaitTurn<AcquireResult> {
  return { kind: 'done', acquired: true, result };
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
  private readonly ctx: ClientContext;
  private readonly held: HeldLeases;
  private readonly waiting = new WaitQueues();
  private readonly handOffs: HandOffs;

  constructor(options: LeaseClientOptions) {
    this.ctx = new ClientContext(resolveClientOptions(options));
    this.store = this.ctx.store;
    this.ownerId = this.ctx.ownerId;
    this.held = new HeldLeases(this.ctx, (lease) => this.handOffs.offer(lease));
    this.handOffs = new HandOffs(this.ctx, this.held, this.waiting);
  }

  /** Subscribes to lease events (`'*'` for all). Returns an unsubscribe function. */
  on<T extends LeaseEventType>(
    type: T | '*',
    listener: (event: LeaseEventOf<T>) => void,
  ): () => void {
    return this.ctx.events.on(type, listener);
  }

  /** The current monotonic time on the client's clock, the scale of every `deadline`. */
  now(): number {
    return this.ctx.guard.now();
  }

  /** Leases this client holds right now. */
  heldLeases(): readonly Lease[] {
    return this.held.list();
  }

  /**
   * Acquires `key` for `ttl`, waiting up to `wait` for a busy key. Returns `acquired` with a
   * {@link Lease}, `busy` with the holder, or `unavailable` when the store cannot answer —
   * never throws for those. Throws `ERR_INVALID_ARGUMENT` for bad arguments (nothing is
   * sent), `ERR_ABORTED` when `signal` fires, `ERR_CLOSED` after {@link close}.
   *
   * With `fences`, the new token is claimed on each fence before the lease is returned, and
   * the answer may also be `claim_failed` (the lease was released); see
   * {@link AcquireOptions.fences}. Without `fences` the answer's type leaves that case out.
   */
  acquire(key: string, options: AcquireOptionsWithoutFences): Promise<AcquireResult>;
  acquire(key: string, options: AcquireOptions): Promise<FencedAcquireResult>;
  acquire(key: string, options: AcquireOptions): Promise<FencedAcquireResult> {
    const ctx = this.ctx;
    let req: ResolvedAcquire;
    let startedAt: number;
    try {
      ctx.assertOpen();
      req = resolveAcquire(key, options, ctx.store, ctx.driftRatio);
      if (req.fences !== undefined) return this.acquireAndClaim(req, req.fences);
      if (req.waitMs !== 0 || req.signal !== undefined) return this.acquireLinked(req);
      startedAt = ctx.guard.now();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    // One try with nothing to link: no async frame of its own (decision 023).
    return this.tryNow(req, ctx.closeSignal, startedAt);
  }

  /** {@link acquire} with a caller's signal to link, or waiting. */
  private async acquireLinked(req: ResolvedAcquire): Promise<AcquireResult> {
    const ctx = this.ctx;
    const linked = req.signal ? linkSignals([req.signal, ctx.closeSignal]) : undefined;
    const signal = linked?.signal ?? ctx.closeSignal;
    try {
      const startedAt = ctx.guard.now();
      if (req.waitMs === 0) return await this.tryNow(req, signal, startedAt);
      if (isQueueingLeaseStore(ctx.store)) {
        return await acquireQueued(ctx, this.held, ctx.store, req, signal, startedAt);
      }
      return await this.waitFor(req, signal, startedAt);
    } finally {
      linked?.dispose();
    }
  }

  /** {@link acquire}, then the claims on `fences` (claim before start, DESIGN §4). */
  private async acquireAndClaim(
    req: ResolvedAcquire,
    fences: readonly ResolvedClaim[],
  ): Promise<FencedAcquireResult> {
    const ctx = this.ctx;
    const result =
      req.waitMs !== 0 || req.signal !== undefined
        ? await this.acquireLinked(req)
        : await this.tryNow(req, ctx.closeSignal, ctx.guard.now());
    if (result.status !== 'acquired') return result;
    const linked = req.signal ? linkSignals([req.signal, ctx.closeSignal]) : undefined;
    try {
      return await claimFences(ctx, result, fences, linked?.signal ?? ctx.closeSignal);
    } finally {
      linked?.dispose();
    }
  }

  /**
   * Runs `fn` under a lease on `key`: acquires (waiting if `wait` is set; claiming on
   * `fences` if given), renews while `fn` runs, and releases in every outcome — return, throw
   * or abort. `fn` receives the lease and a signal that fires when the lease is lost or the
   * caller's `signal` aborts.
   */
  withLease<T>(
    key: string,
    options: AcquireOptionsWithoutFences,
    fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<WithLeaseResult<T>>;
  withLease<T>(
    key: string,
    options: AcquireOptions,
    fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<FencedWithLeaseResult<T>>;
  async withLease<T>(
    key: string,
    options: AcquireOptions,
    fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<FencedWithLeaseResult<T>> {
    const acquired = await this.acquire(key, options);
    if (acquired.status !== 'acquired') return acquired;
    return this.runHolding(acquired.lease, options.signal, fn);
  }

  /** Runs `fn` under `lease`, then releases it: the body of withLease and withSlot. */
  private async runHolding<L extends Lease, T>(
    lease: L,
    callerSignal: AbortSignal | undefined,
    fn: (lease: L, signal: AbortSignal) => Promise<T> | T,
  ): Promise<WithLeaseResult<T>> {
    const linked = callerSignal ? linkSignals([lease.signal, callerSignal]) : undefined;
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

  /**
   * Takes one of the `limit` slots of semaphore `name` for `ttl`, waiting up to `wait` when
   * all are taken. A slot is a key of its own (`name#slot=i`): the lease renews, is lost and
   * is released like a key's, `lease.slot` is its index (stable for as long as it is held),
   * and `lease.token` grows with every grant **of that slot**, so fence each slot's writes
   * under its own scope (the default scope of `fences` is the slot's key). Answers as
   * {@link acquire}; `busy` names the holder of the slot that frees soonest.
   */
  acquireSlot(name: string, options: AcquireSlotOptionsWithoutFences): Promise<SlotAcquireResult>;
  acquireSlot(name: string, options: AcquireSlotOptions): Promise<FencedSlotAcquireResult>;
  async acquireSlot(name: string, options: AcquireSlotOptions): Promise<FencedSlotAcquireResult> {
    const ctx = this.ctx;
    ctx.assertOpen();
    const req = resolveSlotAcquire(name, options, ctx);
    // Slots count tokens each on their own, so one scope shared by all would refuse slots.
    const scoped = options.fences?.find((f) => f.scope !== undefined);
    if (scoped !== undefined)
      throw invalidArgument(
        'fences',
        "must not set scope: a slot's scope is its key",
        scoped.scope,
      );
    const linked = req.base.signal ? linkSignals([req.base.signal, ctx.closeSignal]) : undefined;
    const signal = linked?.signal ?? ctx.closeSignal;
    try {
      const result = await acquireSlot(ctx, this.held, req, signal, ctx.guard.now());
      if (result.status !== 'acquired') return result;
      const slotted = result as Extract<SlotAcquireResult, { status: 'acquired' }>;
      const claims = resolveFences(options.fences, result.lease.key);
      if (claims === undefined) return slotted;
      return (await claimFences(ctx, result, claims, signal)) as FencedSlotAcquireResult;
    } finally {
      linked?.dispose();
    }
  }

  /**
   * Runs `fn` holding one slot of semaphore `name` ({@link acquireSlot}): renews while `fn`
   * runs and releases the slot in every outcome, as {@link withLease} does for a key.
   */
  withSlot<T>(
    name: string,
    options: AcquireSlotOptionsWithoutFences,
    fn: (lease: SlotLease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<WithLeaseResult<T>>;
  withSlot<T>(
    name: string,
    options: AcquireSlotOptions,
    fn: (lease: SlotLease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<FencedWithLeaseResult<T>>;
  async withSlot<T>(
    name: string,
    options: AcquireSlotOptions,
    fn: (lease: SlotLease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<FencedWithLeaseResult<T>> {
    const acquired = await this.acquireSlot(name, options);
    if (acquired.status !== 'acquired') return acquired;
    return this.runHolding(acquired.lease, options.signal, fn);
  }

  /** Takes every key of `keys` or none, in sorted order, within one `wait`: see {@link sets.acquireAll}. */
  acquireAll(
    keys: readonly string[],
    options: sets.AcquireAllOptions,
  ): Promise<sets.AcquireAllResult> {
    return sets.acquireAll(this, keys, options);
  }

  /** Runs `fn` holding every key of `keys` ({@link acquireAll}), then releases them all. */
  withLeases<T>(
    keys: readonly string[],
    options: sets.AcquireAllOptions,
    fn: sets.SetBody<T>,
  ): Promise<sets.WithLeasesResult<T>> {
    return sets.withLeases(this, keys, options, fn);
  }

  /** The key's state: its last token and live holder. Throws `ERR_UNAVAILABLE` if the store cannot answer. */
  async inspect(key: string): Promise<LeaseState> {
    this.ctx.assertOpen();
    const k = validateKey(key);
    return unwrapSettled(
      this.store.kind,
      await boundedRequest(this.ctx.timeouts, this.ctx.requestTimeoutMs, undefined, (o) =>
        this.store.inspect(k, o),
      ),
    );
  }

  /** Live leases whose key starts with `prefix`, in key order (at most `limit`, default 1000). */
  async list(prefix = '', options: { limit?: number } = {}): Promise<LeaseState[]> {
    this.ctx.assertOpen();
    const p = validatePrefix(prefix);
    const limit = options.limit ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
      throw invalidArgument('limit', 'must be an integer from 1 to 10000', limit);
    return unwrapSettled(
      this.store.kind,
      await boundedRequest(this.ctx.timeouts, this.ctx.requestTimeoutMs, undefined, (o) =>
        this.store.list(p, limit, o),
      ),
    );
  }

  /**
   * Stops the client: waiting acquisitions throw `ERR_CLOSED`, and held leases end (their
   * signals fire) and are released at the store. Does not close the store.
   */
  async close(): Promise<void> {
    const ctx = this.ctx;
    if (ctx.closed) return;
    ctx.close();
    await Promise.all(this.held.list().map((l) => l.release()));
    ctx.timeouts.trim();
    ctx.leaseTimers.trim();
  }

  /** `wait: 0`: one try, and busy at once. */
  private tryNow(
    req: ResolvedAcquire,
    signal: AbortSignal,
    startedAt: number,
  ): Promise<AcquireResult> {
    const ctx = this.ctx;
    if (signal.aborted) return Promise.reject(ctx.abortError(signal));
    return attemptAcquire(ctx, this.held, req, signal, startedAt).then((attempt) => {
      if (attempt.kind === 'busy') {
        return busyResult(ctx, req.key, attempt.busy, ctx.guard.now() - startedAt);
      }
      const { result } = attempt;
      if (result.status !== 'acquired') return result;
      return { status: 'acquired', lease: result.lease, waitedMs: ctx.guard.now() - startedAt };
    });
  }

  /** Waiting in this client: parked per key, woken by the store, served by hand-off. */
  private waitFor(
    req: ResolvedAcquire,
    signal: AbortSignal,
    startedAt: number,
  ): Promise<AcquireResult> {
    const ctx = this.ctx;
    return waitForKey<AcquireResult>({
      ask: req,
      startedAt,
      until: startedAt + req.waitMs,
      signal,
      queues: this.waiting,
      clock: ctx.clock,
      now: () => ctx.guard.now(),
      random: ctx.random,
      pollIntervalMs: ctx.pollIntervalMs,
      pendingMs: ctx.requestTimeoutMs,
      watch: (notify) =>
        boundedRequest(ctx.timeouts, ctx.requestTimeoutMs, ctx.closeSignal, () =>
          ctx.store.watch(req.key, notify),
        ),
      watchFailed: (error) =>
        ctx.logger.warn(
          { ownerId: ctx.ownerId, key: req.key, err: String(error) },
          'watch failed; waiting by expiry timer and poll',
        ),
      turn: (waiter) => {
        const delivered = waiter?.take();
        if (delivered !== undefined) {
          const waitedMs = ctx.guard.now() - startedAt;
          return acquiredTurn({ status: 'acquired', lease: delivered, waitedMs });
        }
        if (waiter?.claimed === true) return PENDING;
        const busy = this.handOffs.localHolder(req.key);
        if (busy !== undefined) return { kind: 'busy', busy };
        return attemptAcquire(ctx, this.held, req, signal, startedAt).then((attempt) => {
          if (attempt.kind === 'busy') return attempt;
          const { result } = attempt;
          if (result.status !== 'acquired') return { kind: 'done', acquired: false, result };
          return acquiredTurn({ ...result, waitedMs: ctx.guard.now() - startedAt });
        });
      },
      gaveUp: (busy, now) => busyResult(ctx, req.key, busy, now - startedAt),
      aborted: () => ctx.abortError(signal),
    });
  }
}
