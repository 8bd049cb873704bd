import type { Clock, TimerHandle } from './clock.js';
import { LeaseholdError } from './errors.js';
import type { Settled } from './runtime/request.js';
import { Timed, type TimeoutQueue } from './runtime/timeout-queue.js';
import type {
  BatchRenewingLeaseStore,
  StoreRenewManyResult,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
} from './store.js';

/**
 * How long renewals wait for others due at the same time before they go out together. The
 * timers of leases due at one instant fire in separate turns of the event loop (each lease
 * has its own timer entry), a millisecond or so apart; a renewal is due with two thirds of
 * its lease left, so waiting this long costs nothing a lease could notice.
 */
export const RENEWAL_GATHER_MS = 5;

/**
 * The largest number of leases in one `renewMany` call: bounds one statement's or script's
 * size. 10,000 leases are then 5 calls when all fall due at once.
 */
export const MAX_RENEWALS_PER_CALL = 2_000;

/**
 * The renewal grid of a client whose store renews in batches: a background renewal is due
 * at the grid line at or before its own due time (never later), so the renewals of many
 * leases meet on a few lines and go out as one call each. Eight lines per renewal interval
 * keep the store's calls at about eight per interval however many leases are held (measured
 * with 10,000 leases on SQLite: ten lines gave 10.7 calls, a line's timers now and then
 * firing more than the gather window apart), for renewals at most an eighth of an interval
 * early.
 */
export function renewalGridMs(everyMs: number): number {
  return Math.max(1, Math.floor(everyMs / 8));
}

/** `at` moved back to the grid line at or before it. */
export function onGrid(at: number, gridMs: number): number {
  return Math.floor(at / gridMs) * gridMs;
}

/** What a {@link BatchedRenewal} reports its outcome to: the lease that sent it. */
export interface RenewalOwner {
  /** Called once per renewal, synchronously, with its answer, its failure or its timeout. */
  renewalSettled(renewal: BatchedRenewal, settled: Settled<StoreRenewResult>): void;
}

/**
 * One lease's renewal in a batch: its request, its own timeout (an entry in the client's
 * request {@link TimeoutQueue}, as a bounded request's) and where its answer goes. It is also
 * the `StoreRequestOptions` the batch's options are made from. The batch answers it with a
 * plain call, not a promise: 10,000 leases renewing every 3.3 s made three promises and
 * their reactions per renewal (the batcher's, the bounded request's, the lease's own) the
 * largest share of the client's work after the store driver's.
 *
 * Whichever comes first wins: the store's answer, the call's failure, or the timeout. The
 * timeout ends this renewal only: the call goes on for the others, and a late answer for this
 * lease is not used.
 */
export class BatchedRenewal extends Timed implements StoreRequestOptions {
  private done = false;
  private controller: AbortController | undefined;
  private abortedWith: unknown;

  /**
   * @param sentAt monotonic time taken before the renewal was handed to the batcher: its
   *   timeout runs from it
   */
  constructor(
    readonly request: StoreRenewRequest,
    readonly timeoutMs: number,
    readonly sentAt: number,
    readonly scheduledFor: number,
    private readonly owner: RenewalOwner,
  ) {
    super();
  }

  /** Made only if the store reads it (none does today): most renewals never need one. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedWith !== undefined) this.controller.abort(this.abortedWith);
    }
    return this.controller.signal;
  }

  get settled(): boolean {
    return this.done;
  }

  /** Starts the timeout: from `sentAt`, on the queue's clock. */
  start(timeouts: TimeoutQueue): void {
    timeouts.add(this, this.timeoutMs, this.sentAt);
  }

  answer(result: StoreRenewResult, timeouts: TimeoutQueue): void {
    if (this.done) return;
    this.done = true;
    timeouts.remove(this);
    this.owner.renewalSettled(this, { ok: true, value: result });
  }

  fail(error: unknown, timeouts: TimeoutQueue): void {
    if (this.done) return;
    this.done = true;
    timeouts.remove(this);
    this.owner.renewalSettled(this, { ok: false, error, timedOut: false, aborted: false });
  }

  onTimeout(): void {
    if (this.done) return;
    this.done = true;
    const error = new LeaseholdError(
      'ERR_UNAVAILABLE',
      `store did not answer within ${this.timeoutMs}ms`,
    );
    this.abortedWith = error;
    this.controller?.abort(error);
    this.owner.renewalSettled(this, { ok: false, error, timedOut: true, aborted: false });
  }
}

/**
 * Gathers the renewals a client's leases send within {@link RENEWAL_GATHER_MS} into one
 * `renewMany` call (chunks of {@link MAX_RENEWALS_PER_CALL}). Each renewal still has its own
 * timeout and its own answer ({@link BatchedRenewal}): a renewal whose time ran out is
 * answered as failed while the call goes on for the others, and a late answer is simply not
 * used.
 */
export class RenewalBatcher {
  private pending: BatchedRenewal[] = [];
  private timer: TimerHandle | undefined;
  private readonly flush = (): void => this.send();

  constructor(
    private readonly store: BatchRenewingLeaseStore,
    private readonly clock: Clock,
    private readonly timeouts: TimeoutQueue,
  ) {}

  /** Renews `renewal.request` in the next call and starts its timeout. */
  submit(renewal: BatchedRenewal): void {
    renewal.start(this.timeouts);
    this.pending.push(renewal);
    this.timer ??= this.clock.setTimeout(this.flush, RENEWAL_GATHER_MS, { background: true });
  }

  private send(): void {
    this.timer = undefined;
    const all = this.pending;
    this.pending = [];
    for (let i = 0; i < all.length; i += MAX_RENEWALS_PER_CALL) {
      this.call(
        all.length <= MAX_RENEWALS_PER_CALL ? all : all.slice(i, i + MAX_RENEWALS_PER_CALL),
      );
    }
  }

  private call(batch: BatchedRenewal[]): void {
    // A key at most once per call: a second renewal of one key (a lease and its local
    // successor never renew together, but nothing forbids it) waits for the next call.
    // Renewals that timed out while gathered are not sent.
    const seen = new Set<string>();
    const now: BatchedRenewal[] = [];
    const requests: StoreRenewRequest[] = [];
    for (const r of batch) {
      if (r.settled) continue;
      if (seen.has(r.request.key)) this.pending.push(r);
      else {
        seen.add(r.request.key);
        now.push(r);
        requests.push(r.request);
      }
    }
    if (this.pending.length > 0) {
      this.timer ??= this.clock.setTimeout(this.flush, RENEWAL_GATHER_MS, { background: true });
    }
    if (now.length === 0) return;
    const timeouts = this.timeouts;
    let answer: Promise<readonly StoreRenewManyResult[]>;
    try {
      answer = this.store.renewMany(requests, batchOptions(now));
    } catch (err) {
      answer = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    answer.then(
      (results) => {
        if (results.length !== now.length) {
          const err = new Error(
            `renewMany answered ${results.length} results for ${now.length} leases`,
          );
          for (const r of now) r.fail(err, timeouts);
          return;
        }
        for (let i = 0; i < now.length; i++) {
          const r = results[i]!;
          // This lease's own failure (a 403 for its key): as if its own renew had thrown.
          if (r.status === 'unanswered') now[i]!.fail(r.error, timeouts);
          else now[i]!.answer(r, timeouts);
        }
      },
      (err: unknown) => {
        for (const r of now) r.fail(err, timeouts);
      },
    );
  }
}

/**
 * The options of one call: the longest timeout of its renewals, and a signal that aborts
 * only once every renewal in it has given up (one renewal's timeout must not cut the call
 * short for the others).
 */
function batchOptions(batch: readonly BatchedRenewal[]): StoreRequestOptions {
  let timeoutMs = 1;
  for (const r of batch) timeoutMs = Math.max(timeoutMs, r.timeoutMs);
  let controller: AbortController | undefined;
  return {
    timeoutMs,
    get signal(): AbortSignal {
      if (controller === undefined) {
        const c = new AbortController();
        controller = c;
        let left = batch.length;
        for (const r of batch) {
          const s = r.signal;
          const done = (): void => {
            if (--left === 0) c.abort(s.reason);
          };
          if (s.aborted) done();
          else s.addEventListener('abort', done, { once: true });
        }
      }
      return controller.signal;
    },
  };
}
