import { LeaseholdError } from './errors.js';
import { leaseIdPrefix } from './ids.js';
import { boundedRequest, isProgrammerError, type Settled } from './runtime/request.js';
import type { LeaseContext, LeaseGrant, LeaseHooks } from './lease-grant.js';
import { BatchedRenewal, type RenewalOwner } from './renewal-batch.js';
import { RenewalSchedule, renewTimeoutMs } from './renewal.js';
import type { LossReason, ReleaseResult, RenewResult } from './results.js';
import type { StoreRenewRequest, StoreRenewResult } from './store.js';
import type { Token } from './types.js';

const RELEASED: ReleaseResult = Object.freeze({ status: 'released' });

/** The state of a {@link Lease}: `held` until it is lost or released, then never again. */
export type LeaseStatus = 'held' | 'lost' | 'released';

/**
 * A granted lease: the capability to act on `key` under fencing `token` until `deadline`.
 *
 * The deadline is local and conservative: measured on the monotonic clock from *before* the
 * acquire (or renew) request was sent, minus a clock-drift allowance, so it never ends later
 * than the store's expiry when clocks run at sane rates. `signal` aborts the moment the lease
 * is lost, its deadline passes without a confirmed renewal, the clock misbehaves, or it is
 * released. A lost lease never becomes valid again, even if a late "renewed" answer arrives.
 *
 * Send `token` with every protected write and let the resource reject stale tokens: a lease
 * alone cannot stop a paused process from acting late.
 *
 * @example
 * await using lease = (await client.acquire('report/july', { ttl: '30s' })).lease;
 * const staged = await catalog.stage(lease, 'reports/july', body); // leasehold/catalog
 * await catalog.publish(lease, 'reports/july', staged.handle);
 */
export class Lease implements AsyncDisposable, RenewalOwner {
  readonly key: string;
  readonly leaseId: string;
  readonly ownerId: string;
  readonly token: Token;
  readonly value: string | undefined;
  readonly ttlMs: number;

  /**
   * @internal The store lease's token (what renew and release send) and the last token its
   * grant reserved: equal to `token` unless this lease is or may have local successors.
   */
  readonly storeToken: Token;
  /** @internal */
  readonly blockEnd: Token;

  private readonly ctx: LeaseContext;
  private readonly hooks: LeaseHooks;
  private readonly driftMs: number;
  /** Made on first read of `signal`: a lease nobody watches costs no AbortController. */
  private controller: AbortController | undefined;
  private currentDeadline: number;
  private lastRenewSentAt: number;
  private readonly grantedAt: number;
  private statusValue: LeaseStatus = 'held';
  private reason: LossReason | undefined;
  private readonly schedule: RenewalSchedule;
  /** A renewal in flight on a store without renewMany (one bounded request each). */
  private inflight: Promise<RenewResult> | undefined;
  /**
   * A renewal in flight in the client's batches, with no promise of its own unless someone
   * waits for it ({@link renew} by hand, {@link release}): a background renewal costs no
   * promise (see BatchedRenewal).
   */
  private renewal: BatchedRenewal | undefined;
  /** This lease's batched renewals, one object for all of them (see BatchedRenewal). */
  private batched: BatchedRenewal | undefined;
  private renewalPromise: Promise<RenewResult> | undefined;
  private renewalSettle:
    { resolve: (r: RenewResult) => void; reject: (e: unknown) => void } | undefined;
  /** The background timer is waiting for {@link renewal}: an unexpected error ends the lease. */
  private renewalInBackground = false;
  /** What every renewal of this lease sends (its fields never change). */
  private renewRef: StoreRenewRequest | undefined;
  private releasing: Promise<ReleaseResult> | undefined;
  /** {@link clockNow} for the schedule, made once: `arm` runs twice per renewal. */
  private readonly readClock = (): number | undefined => this.clockNow();

  /** @internal Made by the client's registry of held leases, never by hand. */
  constructor(ctx: LeaseContext, grant: LeaseGrant, hooks: LeaseHooks) {
    this.ctx = ctx;
    this.hooks = hooks;
    this.key = grant.key;
    this.leaseId = grant.leaseId;
    this.ownerId = ctx.ownerId;
    this.token = grant.token;
    this.storeToken = grant.storeToken ?? grant.token;
    this.blockEnd = grant.blockEnd ?? grant.token;
    this.value = grant.value;
    this.ttlMs = grant.ttlMs;
    this.driftMs = grant.driftMs;
    this.grantedAt = grant.grantedAt ?? grant.sentAt;
    this.lastRenewSentAt = grant.sentAt;
    this.currentDeadline = grant.sentAt + grant.ttlMs - grant.driftMs;
    this.schedule = new RenewalSchedule(
      ctx.leaseTimers,
      grant.renewEveryMs,
      grant.ttlMs,
      grant.sentAt,
      () => this.onTimer(),
      ctx.renewals !== undefined,
    );
    this.arm();
  }

  /** Local monotonic time (same clock as the client's `now()`) at which this lease stops being valid. */
  get deadline(): number {
    return this.currentDeadline;
  }

  /**
   * @internal When the request behind the store lease's current validity was sent (the
   * acquire or the last confirmed renewal): a local successor measures its deadline from it.
   */
  get validFrom(): number {
    return this.lastRenewSentAt;
  }

  /** Aborts when the lease stops being valid; its reason is a `LeaseholdError('ERR_LEASE_LOST')`. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.statusValue !== 'held') this.controller.abort(this.lossError());
    }
    return this.controller.signal;
  }

  get status(): LeaseStatus {
    return this.statusValue;
  }

  /** Why the lease ended, once it has. */
  get lossReason(): LossReason | undefined {
    return this.reason;
  }

  /** Milliseconds of local validity left (0 once lost or released). Rechecks the clock. */
  remainingMs(): number {
    if (this.statusValue !== 'held') return 0;
    const now = this.clockNow();
    if (now === undefined) return 0;
    const left = this.currentDeadline - now;
    if (left <= 0) {
      this.end('expired');
      return 0;
    }
    return left;
  }

  /** True while held and before the local deadline. */
  isValid(): boolean {
    return this.remainingMs() > 0;
  }

  /**
   * Throws `ERR_LEASE_LOST` unless the lease is valid for at least `minRemainingMs` more.
   * Call it before starting work; it narrows the window, the fence at the resource closes it.
   */
  assertValid(minRemainingMs = 0): void {
    const left = this.remainingMs();
    if (left <= minRemainingMs) {
      throw new LeaseholdError(
        'ERR_LEASE_LOST',
        left === 0
          ? `lease on ${this.key} (token ${this.token}) is no longer valid: ${this.reason ?? 'expired'}`
          : `lease on ${this.key} (token ${this.token}) has only ${Math.floor(left)}ms left`,
      );
    }
  }

  /**
   * Renews now. `renewed` moves the deadline; `lost` is final; `unavailable` means the renewal
   * was not confirmed and the lease stays valid only until its current deadline.
   */
  renew(): Promise<RenewResult> {
    if (this.statusValue !== 'held') {
      return Promise.resolve({ status: 'lost', reason: this.reason ?? 'lost' });
    }
    return this.renewOnce();
  }

  /**
   * Releases the lease at the store (conditional on lease id and token) and fires `signal`.
   * Waits for an in-flight renewal first. Safe to call more than once; a lease that was
   * already lost is still released at the store in case it lingers there.
   */
  release(): Promise<ReleaseResult> {
    this.releasing ??= this.doRelease();
    return this.releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  toJSON(): Record<string, unknown> {
    return {
      key: this.key,
      leaseIdPrefix: leaseIdPrefix(this.leaseId),
      ownerId: this.ownerId,
      token: this.token.toString(),
      status: this.statusValue,
    };
  }

  private async doRelease(): Promise<ReleaseResult> {
    this.schedule.take();
    const renewing =
      this.inflight ?? (this.renewal !== undefined ? this.renewalResult() : undefined);
    if (renewing !== undefined) await renewing.catch(() => undefined);
    const heldMs = this.heldMs();
    const wasHeld = this.statusValue === 'held';
    this.end('released');
    const { key, leaseId } = this;
    const handedOff = wasHeld ? this.hooks.handOff(this) : undefined;
    let result: ReleaseResult;
    if (typeof handedOff === 'function') {
      // A local successor takes over the store lease: nothing to ask the store. Reported
      // first, so that observers see this lease end before the next one begins.
      result = RELEASED;
      this.emitReleased(result, heldMs);
      handedOff();
      return result;
    } else if (handedOff !== undefined) {
      result = await handedOff;
    } else {
      const { store, timeouts, requestTimeoutMs } = this.ctx;
      const storeToken = this.storeToken;
      const settled = await boundedRequest(timeouts, requestTimeoutMs, undefined, (o) =>
        store.release({ key, leaseId, token: storeToken }, o),
      );
      if (settled.ok) {
        result = settled.value;
      } else {
        if (isProgrammerError(settled.error)) throw settled.error;
        result = { status: 'unavailable', cause: settled.error };
      }
    }
    this.emitReleased(result, heldMs);
    return result;
  }

  private emitReleased(result: ReleaseResult, heldMs: number): void {
    if (!this.ctx.events.active) return;
    this.ctx.events.emit({
      type: 'released',
      key: this.key,
      ownerId: this.ownerId,
      token: this.token,
      leaseIdPrefix: leaseIdPrefix(this.leaseId),
      result: result.status,
      heldMs,
    });
  }

  private renewOnce(): Promise<RenewResult> {
    if (this.ctx.renewals !== undefined) {
      if (this.renewal === undefined) {
        const immediate = this.startBatchedRenewal();
        if (immediate !== undefined) return Promise.resolve(immediate);
      }
      return this.renewalResult();
    }
    if (this.inflight) return this.inflight;
    const p = this.doRenew().finally(() => {
      if (this.inflight === p) this.inflight = undefined;
    });
    this.inflight = p;
    return p;
  }

  /**
   * The background timer's renewal: never leaks a rejection (see {@link failClosed}). `now`
   * is the timer's reading of the clock, taken before anything is sent.
   */
  private renewInBackground(now: number): void {
    if (this.ctx.renewals !== undefined) {
      if (this.renewal === undefined && this.startBatchedRenewal(now) !== undefined) return;
      this.renewalInBackground = true;
      return;
    }
    this.renewOnce().catch((err: unknown) => this.failClosed(err));
  }

  /** What every renewal of this lease sends: made once, its fields never change. */
  private renewRequest(): StoreRenewRequest {
    this.renewRef ??= {
      key: this.key,
      leaseId: this.leaseId,
      token: this.storeToken,
      ttlMs: this.ttlMs,
    };
    return this.renewRef;
  }

  /**
   * Hands a renewal to the client's batcher, or answers at once (undefined when handed):
   * the same checks and timeout as {@link doRenew}. `now`, when given, is a reading of the
   * clock taken just before (the background timer's): the renewal counts as sent then, a
   * few microseconds early, which only makes its deadline earlier.
   */
  private startBatchedRenewal(now?: number): RenewResult | undefined {
    const sentAt = now ?? this.clockNow();
    if (sentAt === undefined) return { status: 'lost', reason: 'clock' };
    const left = this.currentDeadline - sentAt;
    if (left <= 0) {
      this.end('expired');
      return { status: 'lost', reason: 'expired' };
    }
    const scheduledFor = this.schedule.dueAfter(this.lastRenewSentAt);
    const timeoutMs = renewTimeoutMs(left, this.ctx.requestTimeoutMs);
    const renewal = (this.batched ??= new BatchedRenewal(this.renewRequest(), this));
    renewal.begin(timeoutMs, sentAt, scheduledFor);
    this.renewal = renewal;
    this.ctx.renewals!.submit(renewal);
    return undefined;
  }

  /** A promise for the batched renewal in flight, made for whoever waits for it. */
  private renewalResult(): Promise<RenewResult> {
    this.renewalPromise ??= new Promise<RenewResult>((resolve, reject) => {
      this.renewalSettle = { resolve, reject };
    });
    return this.renewalPromise;
  }

  /** @internal The batched renewal's answer, failure or timeout (RenewalOwner). */
  renewalSettled(renewal: BatchedRenewal, settled: Settled<StoreRenewResult>): void {
    if (this.renewal !== renewal) return;
    let result: RenewResult | undefined;
    let error: unknown;
    let threw = false;
    try {
      result = this.finishRenew(renewal.sentAt, renewal.scheduledFor, settled);
    } catch (err) {
      threw = true;
      error = err;
    }
    // Cleared after the outcome is applied, as the unbatched path's `finally` does: whoever
    // asks for the renewal while it is being applied gets this one's answer.
    this.renewal = undefined;
    const settle = this.renewalSettle;
    const background = this.renewalInBackground;
    this.renewalSettle = undefined;
    this.renewalPromise = undefined;
    this.renewalInBackground = false;
    if (!threw) {
      // A background renewal nobody waits for answers no one: its `renewed` result is made
      // only for whoever waits (one object per renewal was the client's largest allocation
      // with 10,000 leases held), including a `renewed` listener that called renew() while
      // the outcome was applied.
      settle?.resolve(result ?? this.renewed());
      return;
    }
    settle?.reject(error);
    if (background) this.failClosed(error);
  }

  private async doRenew(): Promise<RenewResult> {
    const { store, timeouts } = this.ctx;
    const sentAt = this.clockNow();
    if (sentAt === undefined) return { status: 'lost', reason: 'clock' };
    const left = this.currentDeadline - sentAt;
    if (left <= 0) {
      this.end('expired');
      return { status: 'lost', reason: 'expired' };
    }
    const scheduledFor = this.schedule.dueAfter(this.lastRenewSentAt);
    const timeoutMs = renewTimeoutMs(left, this.ctx.requestTimeoutMs);
    const ref = this.renewRequest();
    const settled = await boundedRequest(timeouts, timeoutMs, undefined, (o) =>
      store.renew(ref, o),
    );
    return this.finishRenew(sentAt, scheduledFor, settled) ?? this.renewed();
  }

  /** The answer to a renewal that moved the deadline. */
  private renewed(): RenewResult {
    return { status: 'renewed', deadline: this.currentDeadline };
  }

  /**
   * Applies a renewal's outcome (sent at `sentAt`, due at `scheduledFor`): the deadline moves
   * only on a confirmed `renewed` that arrives before it. Answers undefined for that case
   * ({@link renewed} makes its result for whoever waits), any other outcome itself. Throws
   * only a programmer error.
   */
  private finishRenew(
    sentAt: number,
    scheduledFor: number,
    settled: Settled<StoreRenewResult>,
  ): RenewResult | undefined {
    if (this.statusValue !== 'held') {
      // A late answer never resurrects a lease the client has already given up.
      return { status: 'lost', reason: this.reason ?? 'lost' };
    }
    if (!settled.ok) {
      if (isProgrammerError(settled.error)) throw settled.error;
      this.ctx.events.emit({
        type: 'renew_failed',
        key: this.key,
        ownerId: this.ownerId,
        token: this.token,
        leaseIdPrefix: leaseIdPrefix(this.leaseId),
        cause: settled.error,
      });
      this.ctx.logger.warn(
        {
          key: this.key,
          token: this.token.toString(),
          lease: leaseIdPrefix(this.leaseId),
          err: String(settled.error),
        },
        'lease renewal failed; retrying until the local deadline',
      );
      this.scheduleRetry();
      return { status: 'unavailable', cause: settled.error };
    }
    if (settled.value.status === 'lost') {
      this.end('lost');
      return { status: 'lost', reason: 'lost' };
    }
    const now = this.clockNow();
    if (now === undefined) return { status: 'lost', reason: 'clock' };
    if (now >= this.currentDeadline) {
      this.end('expired');
      return { status: 'lost', reason: 'expired' };
    }
    this.lastRenewSentAt = sentAt;
    this.currentDeadline = Math.max(this.currentDeadline, sentAt + this.ttlMs - this.driftMs);
    this.schedule.next(this.schedule.dueAfter(sentAt));
    this.arm(now); // the deadline moved even when renewals are by hand
    if (this.ctx.events.active) {
      this.ctx.events.emit({
        type: 'renewed',
        key: this.key,
        ownerId: this.ownerId,
        token: this.token,
        leaseIdPrefix: leaseIdPrefix(this.leaseId),
        latencyMs: now - sentAt,
        lateMs: Math.max(0, sentAt - scheduledFor),
      });
    }
    return undefined;
  }

  private heldMs(): number {
    try {
      return Math.max(0, this.ctx.guard.now() - this.grantedAt);
    } catch {
      return 0;
    }
  }

  /**
   * The monotonic time, or undefined when the clock misbehaved: the lease then ends at once
   * (reason `clock`), since its deadline can no longer be trusted.
   */
  private clockNow(): number | undefined {
    try {
      return this.ctx.guard.now();
    } catch {
      this.end('clock');
      return undefined;
    }
  }

  /**
   * (Re)arms the lease's one timer for the earlier of the next renewal and the deadline.
   * `now`, when given, is a reading of the clock just taken (the timer's own time then runs
   * from it, so it fires at the same instant either way); otherwise the clock is read only if
   * the timer must move. Reading it once per step rather than once per use: the clock was
   * five readings per background renewal, about a quarter of the client's own time besides
   * the garbage collector's (profile of 10,000 leases over a store that answers at once).
   */
  private arm(now?: number): void {
    if (this.statusValue !== 'held') return;
    this.schedule.arm(this.currentDeadline, now ?? this.readClock);
  }

  private onTimer(): void {
    // Re-read the clock: a timer may fire early or late, the deadline is what counts.
    if (this.statusValue !== 'held') return;
    const now = this.clockNow();
    if (now === undefined) return;
    const left = this.currentDeadline - now;
    if (left <= 0) {
      this.end('expired');
      return;
    }
    if (this.schedule.isDue(left, this.currentDeadline)) {
      this.schedule.take();
      this.renewInBackground(now);
    }
    this.arm(now);
  }

  /**
   * A background renewal must never leak a rejection: anything unexpected ends the lease
   * (fail closed) and is logged.
   */
  private failClosed(err: unknown): void {
    this.ctx.logger.error(
      { key: this.key, token: this.token.toString(), err: String(err) },
      'lease renewal failed unexpectedly; treating the lease as lost',
    );
    this.end('lost');
  }

  private scheduleRetry(): void {
    if (this.schedule.everyMs === undefined || this.statusValue !== 'held') return;
    const now = this.clockNow();
    if (now !== undefined && this.schedule.retry(now)) this.arm();
  }

  private lossError(): LeaseholdError {
    return new LeaseholdError(
      'ERR_LEASE_LOST',
      `lease on ${this.key} (token ${this.token}) ended: ${this.reason ?? 'lost'}`,
    );
  }

  /** Ends the lease for good: timers stop, the signal fires, the client forgets it. */
  private end(reason: LossReason): void {
    if (this.statusValue !== 'held') return;
    const heldMs = this.heldMs();
    this.statusValue = reason === 'released' ? 'released' : 'lost';
    this.reason = reason;
    this.schedule.stop();
    this.controller?.abort(this.lossError());
    if (reason !== 'released') {
      this.ctx.events.emit({
        type: 'lost',
        key: this.key,
        ownerId: this.ownerId,
        token: this.token,
        leaseIdPrefix: leaseIdPrefix(this.leaseId),
        reason,
        heldMs,
      });
      this.ctx.logger.warn(
        { key: this.key, token: this.token.toString(), lease: leaseIdPrefix(this.leaseId), reason },
        'lease lost',
      );
    }
    this.hooks.settled(this);
  }
}
