import { LeaseholdError } from './errors.js';
import { leaseIdPrefix } from './ids.js';
import {
  reportLost,
  reportReleased,
  reportRenewCrashed,
  reportRenewFailed,
  reportRenewed,
} from './lease-reports.js';
import { BatchedLeaseRenewal } from './batched-lease-renewal.js';
import { DirectRenewal } from './direct-renewal.js';
import { isProgrammerError, type Settled } from './runtime/request.js';
import type { LeaseContext, LeaseGrant, LeaseHooks } from './lease-grant.js';
import type { LeaseRenewal, RenewalTiming, RenewingLease } from './lease-renewal.js';
import { RenewalSchedule, renewTimeoutMs } from './renewal.js';
import { releaseAtStore } from './store-release.js';
import { parseSlotKey } from './slot-keys.js';
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
export class Lease implements AsyncDisposable, RenewingLease {
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
  /** How renewals reach the store and what is in flight: made at the first renewal. */
  private renewals: LeaseRenewal | undefined;
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

  /** The slot's index (0 to limit − 1) for a semaphore's slot lease; undefined for a key's. */
  get slot(): number | undefined {
    return parseSlotKey(this.key)?.slot;
  }

  /** The semaphore's name for a slot lease (`acquireSlot`); undefined for a key's. */
  get semaphore(): string | undefined {
    return parseSlotKey(this.key)?.name;
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
    return this.renewal().renew();
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
    const renewing = this.renewals?.inFlight();
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
      reportReleased(this.ctx, this, result, heldMs);
      handedOff();
      return result;
    } else if (handedOff !== undefined) {
      result = await handedOff;
    } else {
      result = await releaseAtStore(this.ctx, { key, leaseId, token: this.storeToken });
    }
    reportReleased(this.ctx, this, result, heldMs);
    return result;
  }

  /** The lease's renewal strategy: batched where the client batches, otherwise direct. */
  private renewal(): LeaseRenewal {
    const batcher = this.ctx.renewals;
    this.renewals ??=
      batcher !== undefined
        ? new BatchedLeaseRenewal(this, batcher)
        : new DirectRenewal(this, this.ctx);
    return this.renewals;
  }

  /** @internal What every renewal of this lease sends (RenewingLease). */
  renewRequest(): StoreRenewRequest {
    return { key: this.key, leaseId: this.leaseId, token: this.storeToken, ttlMs: this.ttlMs };
  }

  /** @internal Checks before a renewal is sent, and its timing (RenewingLease). */
  prepareRenewal(now: number | undefined, timing: RenewalTiming): RenewResult | undefined {
    const sentAt = now ?? this.clockNow();
    if (sentAt === undefined) return { status: 'lost', reason: 'clock' };
    const left = this.currentDeadline - sentAt;
    if (left <= 0) {
      this.end('expired');
      return { status: 'lost', reason: 'expired' };
    }
    timing.sentAt = sentAt;
    timing.scheduledFor = this.schedule.dueAfter(this.lastRenewSentAt);
    timing.timeoutMs = renewTimeoutMs(left, this.ctx.requestTimeoutMs);
    return undefined;
  }

  /** @internal The answer to a renewal that moved the deadline (RenewingLease). */
  renewed(): RenewResult {
    return { status: 'renewed', deadline: this.currentDeadline };
  }

  /**
   * @internal Applies a renewal's outcome (sent at `sentAt`, due at `scheduledFor`; see
   * RenewingLease): the deadline moves only on a confirmed `renewed` that arrives before it.
   */
  applyRenewal(
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
      reportRenewFailed(this.ctx, this, settled.error);
      this.scheduleRetry();
      return { status: 'unavailable', cause: settled.error };
    }
    if (settled.value.status === 'lost') {
      const reason = settled.value.reason ?? 'lost';
      this.end(reason);
      return { status: 'lost', reason };
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
    reportRenewed(this.ctx, this, now - sentAt, Math.max(0, sentAt - scheduledFor));
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
   * the timer must move: the clock is read once per step, not once per use (decision 035).
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
      this.renewal().renewInBackground(now);
    }
    this.arm(now);
  }

  /**
   * @internal A background renewal must never leak a rejection: anything unexpected ends the
   * lease (fail closed) and is logged (RenewingLease).
   */
  failClosed(err: unknown): void {
    reportRenewCrashed(this.ctx, this, err);
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
    if (reason !== 'released') reportLost(this.ctx, this, reason, heldMs);
    this.hooks.settled(this);
  }
}
