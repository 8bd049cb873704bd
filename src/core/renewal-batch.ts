import type { Clock, TimerHandle } from './runtime/clock.js';
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

/** What a renewal's answer box holds between answers. */
const NO_ANSWER: StoreRenewResult = Object.freeze({ status: 'lost' });

/**
 * The renewal grid of a client whose store renews in batches: a background renewal is due
 * at the grid line at or before its own due time (never later), so the renewals of many
 * leases meet on a few lines and go out as one call each. Eight lines per renewal interval
 * keep the store's calls at about eight per interval however many leases are held (decision
 * 035), for renewals at most an eighth of an interval early.
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
  /**
   * Called once per renewal, synchronously, with its answer, its failure or its timeout.
   * `settled` is valid only during the call (an answer's box is used again).
   */
  renewalSettled(renewal: BatchedRenewal, settled: Settled<StoreRenewResult>): void;
}

/**
 * A lease's renewals in batches: its request, the current renewal's own timeout (an entry in
 * the client's request {@link TimeoutQueue}, as a bounded request's) and where its answer
 * goes. It is also the `StoreRequestOptions` the batch's options are made from. The batch
 * answers it with a plain call, not a promise: 10,000 leases renewing every 3.3 s made three
 * promises and their reactions per renewal (the batcher's, the bounded request's, the lease's
 * own) the largest share of the client's work after the store driver's.
 *
 * One object per lease, used again for each of its renewals ({@link begin}); each renewal has
 * a generation ({@link gen}), and a batch answers a renewal only while the generation it was
 * sent with is still the current one. An object per renewal was the client's largest
 * allocation (116 of about 485 bytes per renewal, allocation sampling with 10,000 leases over
 * a store that answers at once), and none of them was freed by a scavenge: V8 had pretenured
 * the allocation site, so every renewal made old-space garbage for a full mark-compact of the
 * heap to clear every few seconds (figures: decision 035).
 *
 * Whichever comes first wins: the store's answer, the call's failure, or the timeout. The
 * timeout ends this renewal only: the call goes on for the others, and a late answer for this
 * renewal is not used — not even after the lease began its next one.
 */
export class BatchedRenewal extends Timed implements StoreRequestOptions {
  /** Increases with each renewal: an answer is for the renewal whose generation it carries. */
  private generation = 0;
  private done = true;
  private controller: AbortController | undefined;
  private abortedWith: unknown;
  private timeout = 1;
  private sent = 0;
  private scheduled = 0;
  /**
   * The answer handed to the owner, one box for all renewals (the owner reads it
   * synchronously and keeps nothing of it): an object per answer was a tenth of the client's
   * allocation with 10,000 leases held.
   */
  private readonly answered: { ok: true; value: StoreRenewResult } = { ok: true, value: NO_ANSWER };

  constructor(
    readonly request: StoreRenewRequest,
    private readonly owner: RenewalOwner,
  ) {
    super();
  }

  /**
   * Starts the next renewal (the one before must be settled).
   *
   * @param sentAt monotonic time taken before the renewal was handed to the batcher: its
   *   timeout runs from it
   * @param scheduledFor when the renewal was due (for the `renewed` event's lateness)
   */
  begin(timeoutMs: number, sentAt: number, scheduledFor: number): void {
    if (!this.done) throw new Error('BatchedRenewal: a renewal is already in flight');
    this.generation++;
    this.done = false;
    this.controller = undefined;
    this.abortedWith = undefined;
    this.timeout = timeoutMs;
    this.sent = sentAt;
    this.scheduled = scheduledFor;
  }

  /** The current renewal's generation. */
  get gen(): number {
    return this.generation;
  }

  get timeoutMs(): number {
    return this.timeout;
  }

  get sentAt(): number {
    return this.sent;
  }

  get scheduledFor(): number {
    return this.scheduled;
  }

  /** Made only if the store reads it (none does today): most renewals never need one. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedWith !== undefined) this.controller.abort(this.abortedWith);
    }
    return this.controller.signal;
  }

  /** Whether the current renewal has its outcome. */
  get settled(): boolean {
    return this.done;
  }

  /** Whether renewal `gen` is still waiting for its outcome. */
  awaits(gen: number): boolean {
    return !this.done && gen === this.generation;
  }

  /** Starts the timeout: from `sentAt`, on the queue's clock. */
  start(timeouts: TimeoutQueue): void {
    timeouts.add(this, this.timeout, this.sent);
  }

  /** The store's answer for renewal `gen`; ignored unless that renewal still waits. */
  answer(gen: number, result: StoreRenewResult, timeouts: TimeoutQueue): void {
    if (!this.awaits(gen)) return;
    this.done = true;
    timeouts.remove(this);
    const answered = this.answered;
    answered.value = result;
    this.owner.renewalSettled(this, answered);
    // Not kept until the next renewal: the box lives as long as the lease, and an answer it
    // held for seconds would be carried into the old generation by the garbage collector.
    answered.value = NO_ANSWER;
  }

  /** The failure of renewal `gen`'s call; ignored unless that renewal still waits. */
  fail(gen: number, error: unknown, timeouts: TimeoutQueue): void {
    if (!this.awaits(gen)) return;
    this.done = true;
    timeouts.remove(this);
    this.owner.renewalSettled(this, { ok: false, error, timedOut: false, aborted: false });
  }

  onTimeout(): void {
    if (this.done) return;
    this.done = true;
    const error = new LeaseholdError(
      'ERR_UNAVAILABLE',
      `store did not answer within ${this.timeout}ms`,
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
  /** The generation each pending renewal was submitted with (parallel to `pending`). */
  private pendingGens: number[] = [];
  private timer: TimerHandle | undefined;
  private readonly flush = (): void => this.send();

  constructor(
    private readonly store: BatchRenewingLeaseStore,
    private readonly clock: Clock,
    private readonly timeouts: TimeoutQueue,
  ) {}

  /** Renews `renewal.request` (its current renewal) in the next call and starts its timeout. */
  submit(renewal: BatchedRenewal): void {
    renewal.start(this.timeouts);
    this.pending.push(renewal);
    this.pendingGens.push(renewal.gen);
    this.timer ??= this.clock.setTimeout(this.flush, RENEWAL_GATHER_MS, { background: true });
  }

  private send(): void {
    this.timer = undefined;
    const all = this.pending;
    const gens = this.pendingGens;
    this.pending = [];
    this.pendingGens = [];
    for (let i = 0; i < all.length; i += MAX_RENEWALS_PER_CALL) {
      if (all.length <= MAX_RENEWALS_PER_CALL) this.call(all, gens);
      else {
        const end = i + MAX_RENEWALS_PER_CALL;
        this.call(all.slice(i, end), gens.slice(i, end));
      }
    }
  }

  /** Sends `batch` (whose renewal `i` was submitted as generation `batchGens[i]`); owns both. */
  private call(batch: BatchedRenewal[], batchGens: number[]): void {
    // A key at most once per call: a second renewal of one key (a lease and its local
    // successor never renew together, but nothing forbids it) waits for the next call.
    // Renewals that timed out while gathered are not sent.
    // A fresh set per call, not one map kept across calls: a map of every key held was slower
    // to look up in than the set is to build (decision 035).
    const seen = new Set<string>();
    // The renewals sent are compacted into `batch` and `batchGens` themselves (this call owns
    // both; a sent one is never behind the slot it moves to): usually every one is sent, and
    // copies of 2,000 entries grown one push at a time were most of what a call allocated.
    const now = batch;
    const gens = batchGens;
    const requests = new Array<StoreRenewRequest>(batch.length);
    let n = 0;
    for (let i = 0; i < batch.length; i++) {
      const r = batch[i]!;
      const gen = batchGens[i]!;
      if (!r.awaits(gen)) continue;
      const key = r.request.key;
      if (seen.has(key)) {
        this.pending.push(r);
        this.pendingGens.push(gen);
      } else {
        seen.add(key);
        now[n] = r;
        gens[n] = gen;
        requests[n++] = r.request;
      }
    }
    now.length = n;
    gens.length = n;
    requests.length = n;
    if (this.pending.length > 0) {
      this.timer ??= this.clock.setTimeout(this.flush, RENEWAL_GATHER_MS, { background: true });
    }
    if (now.length === 0) return;
    const timeouts = this.timeouts;
    let answer: Promise<readonly StoreRenewManyResult[]>;
    try {
      answer = this.store.renewMany(requests, batchOptions(now, gens));
    } catch (err) {
      answer = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    answer.then(
      (results) => {
        if (results.length !== now.length) {
          const err = new Error(
            `renewMany answered ${results.length} results for ${now.length} leases`,
          );
          for (let i = 0; i < now.length; i++) now[i]!.fail(gens[i]!, err, timeouts);
          return;
        }
        for (let i = 0; i < now.length; i++) {
          const r = results[i]!;
          // This lease's own failure (a 403 for its key): as if its own renew had thrown.
          if (r.status === 'unanswered') now[i]!.fail(gens[i]!, r.error, timeouts);
          else now[i]!.answer(gens[i]!, r, timeouts);
        }
      },
      (err: unknown) => {
        for (let i = 0; i < now.length; i++) now[i]!.fail(gens[i]!, err, timeouts);
      },
    );
  }
}

/**
 * The options of one call: the longest timeout of its renewals, and a signal that aborts
 * only once every renewal in it has given up (one renewal's timeout must not cut the call
 * short for the others). A renewal whose lease has moved on to its next renewal by the time
 * the signal is first read (it timed out) counts as given up on this call.
 */
function batchOptions(
  batch: readonly BatchedRenewal[],
  gens: readonly number[],
): StoreRequestOptions {
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
        let reason: unknown;
        const done = (why: unknown): void => {
          reason ??= why;
          if (--left === 0) c.abort(reason);
        };
        batch.forEach((r, i) => {
          if (r.gen !== gens[i]) {
            return done(new LeaseholdError('ERR_UNAVAILABLE', 'the renewal gave up on this call'));
          }
          const s = r.signal;
          if (s.aborted) done(s.reason);
          else s.addEventListener('abort', () => done(s.reason), { once: true });
        });
      }
      return controller.signal;
    },
  };
}
