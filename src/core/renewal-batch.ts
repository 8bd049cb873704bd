import type { Clock, TimerHandle } from './clock.js';
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

interface Pending {
  readonly lease: StoreRenewRequest;
  readonly options: StoreRequestOptions;
  readonly resolve: (result: StoreRenewResult) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Gathers the renewals a client's leases send within {@link RENEWAL_GATHER_MS} into one
 * `renewMany` call (chunks of {@link MAX_RENEWALS_PER_CALL}). Each renewal still has its own
 * timeout and its own answer: the caller wraps {@link renew} in its bounded request, so a
 * renewal whose time ran out is answered as failed while the call goes on for the others,
 * and a late answer is simply not used.
 */
export class RenewalBatcher {
  private pending: Pending[] = [];
  private timer: TimerHandle | undefined;
  private readonly flush = (): void => this.send();

  constructor(
    private readonly store: BatchRenewingLeaseStore,
    private readonly clock: Clock,
  ) {}

  /** Renews `lease` in the next call; resolves with its own answer. */
  renew(lease: StoreRenewRequest, options: StoreRequestOptions): Promise<StoreRenewResult> {
    return new Promise<StoreRenewResult>((resolve, reject) => {
      this.pending.push({ lease, options, resolve, reject });
      this.timer ??= this.clock.setTimeout(this.flush, RENEWAL_GATHER_MS, { background: true });
    });
  }

  private send(): void {
    this.timer = undefined;
    const all = this.pending;
    this.pending = [];
    for (let i = 0; i < all.length; i += MAX_RENEWALS_PER_CALL) {
      this.call(all.slice(i, i + MAX_RENEWALS_PER_CALL));
    }
  }

  private call(batch: Pending[]): void {
    // A key at most once per call: a second renewal of one key (a lease and its local
    // successor never renew together, but nothing forbids it) waits for the next call.
    const seen = new Set<string>();
    const now: Pending[] = [];
    for (const p of batch) {
      if (seen.has(p.lease.key)) this.pending.push(p);
      else {
        seen.add(p.lease.key);
        now.push(p);
      }
    }
    if (this.pending.length > 0) {
      this.timer ??= this.clock.setTimeout(this.flush, RENEWAL_GATHER_MS, { background: true });
    }
    const options = batchOptions(now);
    let answer: Promise<readonly StoreRenewManyResult[]>;
    try {
      answer = this.store.renewMany(
        now.map((p) => p.lease),
        options,
      );
    } catch (err) {
      answer = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    answer.then(
      (results) => {
        if (results.length !== now.length) {
          const err = new Error(
            `renewMany answered ${results.length} results for ${now.length} leases`,
          );
          for (const p of now) p.reject(err);
          return;
        }
        now.forEach((p, i) => {
          const r = results[i]!;
          // This lease's own failure (a 403 for its key): as if its own renew had thrown.
          if (r.status === 'unanswered') p.reject(r.error);
          else p.resolve(r);
        });
      },
      (err: unknown) => {
        for (const p of now) p.reject(err);
      },
    );
  }
}

/**
 * The options of one call: the longest timeout of its renewals, and a signal that aborts
 * only once every renewal in it has given up (one renewal's timeout must not cut the call
 * short for the others).
 */
function batchOptions(batch: readonly Pending[]): StoreRequestOptions {
  let timeoutMs = 1;
  for (const p of batch) timeoutMs = Math.max(timeoutMs, p.options.timeoutMs);
  let controller: AbortController | undefined;
  return {
    timeoutMs,
    get signal(): AbortSignal {
      if (controller === undefined) {
        const c = new AbortController();
        controller = c;
        let left = batch.length;
        for (const p of batch) {
          const s = p.options.signal;
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
