import { onGrid, renewalGridMs } from './renewal-batch.js';
import { Timed, type TimeoutQueue } from './runtime/timeout-queue.js';

/**
 * When a lease next needs attention: its next background renewal and its deadline, behind
 * one timer at the earlier of the two. A lease that is acquired and released at once costs
 * one timer, not two; the timer is an entry in the client's lease-timer queue, not a Node
 * timer of its own (see TimeoutQueue).
 */
export class RenewalSchedule extends Timed {
  private timerAt = Number.POSITIVE_INFINITY;
  /**
   * When the next background renewal is due; +Infinity while none is scheduled (not
   * undefined: V8 keeps a field that only ever holds numbers as a mutable double, while one
   * that may hold undefined stores each new time as a fresh heap number that lives until the
   * next renewal, long enough to be promoted).
   */
  private renewAt = Number.POSITIVE_INFINITY;
  /** The renewal grid where the store renews in batches (renewal-batch.ts); 0 for none. */
  private readonly gridMs: number;

  /**
   * @param everyMs background renewal cadence, or undefined to renew only by hand
   * @param grantedFrom when the request behind the lease's validity was sent
   * @param batched whether renewals go out in batches: they are then due on the grid
   */
  constructor(
    private readonly timers: TimeoutQueue,
    readonly everyMs: number | undefined,
    private readonly ttlMs: number,
    grantedFrom: number,
    private readonly fire: () => void,
    batched = false,
  ) {
    super();
    this.gridMs = batched && everyMs !== undefined ? renewalGridMs(everyMs) : 0;
    if (everyMs !== undefined) this.renewAt = this.dueAfter(grantedFrom);
  }

  /**
   * When the renewal after one sent at `sentAt` was (or is) due: a cadence after it, or the
   * grid line at or before that (never later, and always after `sentAt`: a line is an eighth
   * of the cadence).
   */
  dueAfter(sentAt: number): number {
    const at = sentAt + (this.everyMs ?? 0);
    return this.gridMs > 0 ? onGrid(at, this.gridMs) : at;
  }

  /**
   * Whether the background renewal is due with `left` ms of validity before `deadline`.
   * `left ≤ deadline − renewAt`, not `deadline − left ≥ renewAt`: subtraction rounds
   * monotonically, so this holds whenever now ≥ renewAt; the other form can round below
   * renewAt at fractional readings, and the timer then re-armed at 0 ms forever.
   */
  isDue(left: number, deadline: number): boolean {
    // With none scheduled, deadline − Infinity is −Infinity: never due.
    return left <= deadline - this.renewAt;
  }

  /** Marks the due renewal as started: none is scheduled until it answers. */
  take(): void {
    this.renewAt = Number.POSITIVE_INFINITY;
  }

  /** Schedules the next background renewal (nothing when renewals are by hand). */
  next(at: number): boolean {
    if (this.everyMs === undefined) return false;
    this.renewAt = at;
    return true;
  }

  /** After a failed renewal: retry soon, well before the deadline, at most at the cadence. */
  retry(now: number): boolean {
    if (this.everyMs === undefined) return false;
    return this.next(now + Math.min(this.everyMs, Math.max(25, Math.floor(this.ttlMs / 10))));
  }

  /**
   * (Re)arms the one timer for the earlier of the next renewal and `deadline`. `now` is a
   * reading of the clock, or a function that reads it (called only if the timer must move).
   */
  arm(deadline: number, now: number | (() => number | undefined)): void {
    const at = Math.min(this.renewAt, deadline);
    if (this.timers.has(this)) {
      if (at === this.timerAt) return;
      this.timers.remove(this);
    }
    const t = typeof now === 'number' ? now : now();
    if (t === undefined) return;
    this.timerAt = at;
    this.timers.add(this, Math.max(0, at - t), t);
  }

  /** Stops for good: no renewal, no timer. */
  stop(): void {
    this.renewAt = Number.POSITIVE_INFINITY;
    this.timers.remove(this);
  }

  onTimeout(): void {
    this.fire();
  }
}

/**
 * The timeout of one renewal with `left` ms of validity. The request may take no longer than
 * the lease has left: a renewal still in flight at the deadline counts as failed
 * (k8s#44887). It gets at most half of that (and at most the request timeout), so that a
 * lost reply leaves time for a retry: waiting the whole validity for one answer turned a
 * single dropped packet into a lost lease.
 */
export function renewTimeoutMs(left: number, requestTimeoutMs: number): number {
  return Math.max(
    1,
    Math.floor(Math.max(Math.min(left, 25), Math.min(requestTimeoutMs, left / 2))),
  );
}
