import type { MonotonicGuard } from './clock.js';
import { LeaseholdError } from './errors.js';
import type { LeaseEvents, Logger } from './events.js';
import { leaseIdPrefix } from './ids.js';
import { boundedRequest, isProgrammerError } from './request.js';
import { Timed, type TimeoutQueue } from './timeout-queue.js';
import type { LossReason, ReleaseResult, RenewResult } from './results.js';
import type { LeaseStore } from './store.js';
import type { Token } from './types.js';

const RELEASED: ReleaseResult = Object.freeze({ status: 'released' });

/** The state of a {@link Lease}: `held` until it is lost or released, then never again. */
export type LeaseStatus = 'held' | 'lost' | 'released';

/** Everything a Lease needs from the client that made it. */
export interface LeaseInit {
  readonly store: LeaseStore;
  /** The client's request timeouts (renewals and the release use them). */
  readonly timeouts: TimeoutQueue;
  /** The client's lease timers (background: they never keep the process alive). */
  readonly leaseTimers: TimeoutQueue;
  readonly guard: MonotonicGuard;
  readonly events: LeaseEvents;
  readonly logger: Logger;
  readonly key: string;
  readonly leaseId: string;
  readonly ownerId: string;
  readonly token: Token;
  /**
   * The store lease this lease acts under, when it is a local successor (decision 007): the
   * token the store's record holds (renew and release send it) and the last token of the
   * block that store grant reserved. Absent for a lease the store granted itself: `token`
   * is then both, unless `blockEnd` says the grant reserved more.
   */
  readonly storeToken?: Token;
  readonly blockEnd?: Token;
  readonly value: string | undefined;
  readonly ttlMs: number;
  /** The clock-drift allowance subtracted from every deadline. */
  readonly driftMs: number;
  /**
   * Monotonic time taken before the request that established the store lease's current
   * validity was sent: the acquire, or for a local successor its predecessor's last
   * confirmed renewal (the deadline is measured from it).
   */
  readonly sentAt: number;
  /** When this lease began, for `heldMs`; defaults to `sentAt`. */
  readonly grantedAt?: number;
  /** Background renewal cadence, or undefined to renew only by hand. */
  readonly renewEveryMs: number | undefined;
  /** Timeout for a release request, and the cap on a renewal's. */
  readonly requestTimeoutMs: number;
  /**
   * Offered the release first: returns the outcome when it passed the key straight to a
   * waiter (one atomic release-and-acquire), a function when the key passes to a local
   * successor under the same store lease (called once the release is reported), or
   * undefined to release as usual.
   */
  readonly handOff?: (lease: Lease) => Promise<ReleaseResult> | (() => void) | undefined;
  readonly onSettled: (lease: Lease) => void;
}

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
export class Lease implements AsyncDisposable {
  readonly key: string;
  readonly leaseId: string;
  readonly ownerId: string;
  readonly token: Token;
  readonly value: string | undefined;
  readonly ttlMs: number;

  /**
   * @internal The client's bookkeeping: this lease's index in its client's list of held
   * leases (-1 once settled), and whether its release is being handed to a waiter.
   */
  heldSlot = -1;
  /** @internal */
  handingOff = false;
  /**
   * @internal The store lease's token (what renew and release send) and the last token its
   * grant reserved: equal to `token` unless this lease is or may have local successors.
   */
  readonly storeToken: Token;
  /** @internal */
  readonly blockEnd: Token;

  private readonly init: LeaseInit;
  /** Made on first read of `signal`: a lease nobody watches costs no AbortController. */
  private controller: AbortController | undefined;
  private currentDeadline: number;
  private lastRenewSentAt: number;
  private readonly grantedAt: number;
  private statusValue: LeaseStatus = 'held';
  private reason: LossReason | undefined;
  /**
   * One timer per lease, at the earlier of the next renewal and the deadline: a lease that is
   * acquired and released at once costs one timer, not two. It is an entry in the client's
   * lease-timer queue, not a Node timer of its own (see TimeoutQueue).
   */
  private readonly timer = new LeaseTimer(() => this.onTimer());
  private timerAt = Number.POSITIVE_INFINITY;
  /** When the next background renewal is due; undefined while none is scheduled. */
  private renewAt: number | undefined;
  private inflight: Promise<RenewResult> | undefined;
  private releasing: Promise<ReleaseResult> | undefined;

  constructor(init: LeaseInit) {
    this.init = init;
    this.key = init.key;
    this.leaseId = init.leaseId;
    this.ownerId = init.ownerId;
    this.token = init.token;
    this.storeToken = init.storeToken ?? init.token;
    this.blockEnd = init.blockEnd ?? init.token;
    this.value = init.value;
    this.ttlMs = init.ttlMs;
    this.grantedAt = init.grantedAt ?? init.sentAt;
    this.lastRenewSentAt = init.sentAt;
    this.currentDeadline = init.sentAt + init.ttlMs - init.driftMs;
    if (init.renewEveryMs !== undefined) this.renewAt = init.sentAt + init.renewEveryMs;
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
    let now: number;
    try {
      now = this.init.guard.now();
    } catch {
      this.end('clock');
      return 0;
    }
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
    this.clearRenewTimer();
    if (this.inflight) await this.inflight.catch(() => undefined);
    const heldMs = this.heldMs();
    const wasHeld = this.statusValue === 'held';
    this.end('released');
    const { key, leaseId } = this;
    const handedOff = wasHeld ? this.init.handOff?.(this) : undefined;
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
      const { store, timeouts } = this.init;
      const storeToken = this.storeToken;
      const settled = await boundedRequest(timeouts, this.init.requestTimeoutMs, undefined, (o) =>
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
    if (!this.init.events.active) return;
    this.init.events.emit({
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
    if (this.inflight) return this.inflight;
    const p = this.doRenew().finally(() => {
      if (this.inflight === p) this.inflight = undefined;
    });
    this.inflight = p;
    return p;
  }

  private async doRenew(): Promise<RenewResult> {
    const { guard, store, timeouts } = this.init;
    let sentAt: number;
    try {
      sentAt = guard.now();
    } catch {
      this.end('clock');
      return { status: 'lost', reason: 'clock' };
    }
    const left = this.currentDeadline - sentAt;
    if (left <= 0) {
      this.end('expired');
      return { status: 'lost', reason: 'expired' };
    }
    const scheduledFor = this.lastRenewSentAt + (this.init.renewEveryMs ?? 0);
    // The request may take no longer than the lease has left: a renewal still in flight at
    // the deadline counts as failed (k8s#44887). It gets at most half of that (and at most
    // the request timeout), so that a lost reply leaves time for a retry: waiting the whole
    // validity for one answer turned a single dropped packet into a lost lease.
    const timeoutMs = Math.max(
      1,
      Math.floor(Math.max(Math.min(left, 25), Math.min(this.init.requestTimeoutMs, left / 2))),
    );
    const settled = await boundedRequest(timeouts, timeoutMs, undefined, (o) =>
      store.renew(
        { key: this.key, leaseId: this.leaseId, token: this.storeToken, ttlMs: this.ttlMs },
        o,
      ),
    );
    if (this.statusValue !== 'held') {
      // A late answer never resurrects a lease the client has already given up.
      return { status: 'lost', reason: this.reason ?? 'lost' };
    }
    if (!settled.ok) {
      if (isProgrammerError(settled.error)) throw settled.error;
      this.init.events.emit({
        type: 'renew_failed',
        key: this.key,
        ownerId: this.ownerId,
        token: this.token,
        leaseIdPrefix: leaseIdPrefix(this.leaseId),
        cause: settled.error,
      });
      this.init.logger.warn(
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
    let now: number;
    try {
      now = guard.now();
    } catch {
      this.end('clock');
      return { status: 'lost', reason: 'clock' };
    }
    if (now >= this.currentDeadline) {
      this.end('expired');
      return { status: 'lost', reason: 'expired' };
    }
    this.lastRenewSentAt = sentAt;
    this.currentDeadline = Math.max(this.currentDeadline, sentAt + this.ttlMs - this.init.driftMs);
    this.scheduleRenewal(sentAt + (this.init.renewEveryMs ?? 0));
    this.arm(); // the deadline moved even when renewals are by hand
    if (this.init.events.active) {
      this.init.events.emit({
        type: 'renewed',
        key: this.key,
        ownerId: this.ownerId,
        token: this.token,
        leaseIdPrefix: leaseIdPrefix(this.leaseId),
        latencyMs: now - sentAt,
        lateMs: Math.max(0, sentAt - scheduledFor),
      });
    }
    return { status: 'renewed', deadline: this.currentDeadline };
  }

  private heldMs(): number {
    try {
      return Math.max(0, this.init.guard.now() - this.grantedAt);
    } catch {
      return 0;
    }
  }

  /** (Re)arms the lease's one timer for the earlier of the next renewal and the deadline. */
  private arm(): void {
    if (this.statusValue !== 'held') return;
    const at = Math.min(this.renewAt ?? Number.POSITIVE_INFINITY, this.currentDeadline);
    const timers = this.init.leaseTimers;
    if (timers.has(this.timer)) {
      if (at === this.timerAt) return;
      timers.remove(this.timer);
    }
    let now: number;
    try {
      now = this.init.guard.now();
    } catch {
      this.end('clock');
      return;
    }
    this.timerAt = at;
    timers.add(this.timer, Math.max(0, at - now), now);
  }

  private onTimer(): void {
    // Re-read the clock: a timer may fire early or late, the deadline is what counts.
    if (this.statusValue !== 'held') return;
    const left = this.remainingMs();
    if (left <= 0) return;
    // `left ≤ deadline − renewAt`, not `deadline − left ≥ renewAt`: subtraction rounds
    // monotonically, so this holds whenever now ≥ renewAt; the other form can round below
    // renewAt at fractional readings, and the timer then re-armed at 0 ms forever.
    if (this.renewAt !== undefined && left <= this.currentDeadline - this.renewAt) {
      this.renewAt = undefined;
      // A background renewal must never leak a rejection: anything unexpected ends the lease
      // (fail closed) and is logged.
      this.renewOnce().catch((err: unknown) => {
        this.init.logger.error(
          { key: this.key, token: this.token.toString(), err: String(err) },
          'lease renewal failed unexpectedly; treating the lease as lost',
        );
        this.end('lost');
      });
    }
    this.arm();
  }

  private scheduleRenewal(at: number): void {
    if (this.init.renewEveryMs === undefined || this.statusValue !== 'held') return;
    this.renewAt = at;
    this.arm();
  }

  private scheduleRetry(): void {
    if (this.init.renewEveryMs === undefined || this.statusValue !== 'held') return;
    const retryMs = Math.min(this.init.renewEveryMs, Math.max(25, Math.floor(this.ttlMs / 10)));
    let now: number;
    try {
      now = this.init.guard.now();
    } catch {
      this.end('clock');
      return;
    }
    this.scheduleRenewal(now + retryMs);
  }

  private clearRenewTimer(): void {
    this.renewAt = undefined;
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
    this.renewAt = undefined;
    this.init.leaseTimers.remove(this.timer);
    this.controller?.abort(this.lossError());
    if (reason !== 'released') {
      this.init.events.emit({
        type: 'lost',
        key: this.key,
        ownerId: this.ownerId,
        token: this.token,
        leaseIdPrefix: leaseIdPrefix(this.leaseId),
        reason,
        heldMs,
      });
      this.init.logger.warn(
        { key: this.key, token: this.token.toString(), lease: leaseIdPrefix(this.leaseId), reason },
        'lease lost',
      );
    }
    this.init.onSettled(this);
  }
}

/** A lease's entry in its client's lease-timer queue. */
class LeaseTimer extends Timed {
  constructor(private readonly fire: () => void) {
    super();
  }

  onTimeout(): void {
    this.fire();
  }
}
