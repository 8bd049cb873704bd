import { LeaseholdError, isLeaseholdError } from './errors.js';
import { onAbortOf } from './signals.js';
import { Timed, type TimeoutQueue } from './timeout-queue.js';

/**
 * What a bounded request hands the work it runs: the time it may still take and a signal that
 * fires when the caller gives up or the time is over. The store contract names it
 * `StoreRequestOptions` (core/store.ts).
 */
export interface RequestOptions {
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
}

/** The outcome of one bounded store request. */
export type Settled<T> =
  | { readonly ok: true; readonly value: T }
  | {
      readonly ok: false;
      readonly error: unknown;
      readonly timedOut: boolean;
      readonly aborted: boolean;
    };

/**
 * Runs one store request under a timeout (in the client's {@link TimeoutQueue}, on its
 * injected clock), and under the caller's signal. Whichever comes first wins: a store answer
 * that arrives after the timeout is not used (the caller treats the request as failed) but is
 * handed to `onLate`, so a late grant can be cleaned up.
 */
export function boundedRequest<T>(
  timeouts: TimeoutQueue,
  timeoutMs: number,
  outer: AbortSignal | undefined,
  run: (options: RequestOptions) => Promise<T>,
  onLate?: (late: Promise<T>) => void,
): Promise<Settled<T>> {
  if (outer?.aborted === true) {
    // Never start a request for a caller that has already given up: stores need not check.
    return Promise.resolve({
      ok: false,
      error: new LeaseholdError('ERR_ABORTED', 'the operation was aborted', {
        cause: outer.reason,
      }),
      timedOut: false,
      aborted: true,
    });
  }
  return new BoundedRequest<T>(timeoutMs, onLate).start(timeouts, outer, run);
}

/**
 * One request in flight. It is also the `RequestOptions` the store sees and its own
 * entry in the timeout queue, so a request costs one object and one promise (no timer of its
 * own): this runs twice per lease on the hot path.
 */
class BoundedRequest<T> extends Timed implements RequestOptions {
  private done = false;
  private timeouts: TimeoutQueue | undefined;
  private unsubscribe: (() => void) | undefined;
  private resolve: ((settled: Settled<T>) => void) | undefined;
  private pending: Promise<T> | undefined;
  // Made only if the store reads `signal`: most never do, and an AbortController per
  // request was a fifth of the client's CPU on a hot path.
  private controller: AbortController | undefined;
  private abortedWith: unknown;
  /** Gave up while `run` was still on the stack: its promise goes to `onLate` once it exists. */
  private lateOwed = false;

  constructor(
    readonly timeoutMs: number,
    private readonly onLate: ((late: Promise<T>) => void) | undefined,
  ) {
    super();
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedWith !== undefined) this.controller.abort(this.abortedWith);
    }
    return this.controller.signal;
  }

  start(
    timeouts: TimeoutQueue,
    outer: AbortSignal | undefined,
    run: (options: RequestOptions) => Promise<T>,
  ): Promise<Settled<T>> {
    const settled = new Promise<Settled<T>>((resolve) => {
      this.resolve = resolve;
    });
    this.timeouts = timeouts;
    timeouts.add(this, this.timeoutMs);
    if (outer !== undefined) this.unsubscribe = onAbortOf(outer, (r) => this.abort(r));
    let pending: Promise<T>;
    try {
      pending = run(this);
    } catch (err) {
      pending = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    this.pending = pending;
    if (this.lateOwed) this.onLate?.(pending);
    pending.then(
      (value) => this.finish({ ok: true, value }),
      (error: unknown) => this.finish({ ok: false, error, timedOut: false, aborted: false }),
    );
    return settled;
  }

  onTimeout(): void {
    const error = new LeaseholdError(
      'ERR_UNAVAILABLE',
      `store did not answer within ${this.timeoutMs}ms`,
    );
    this.abortStore(error);
    this.finish({ ok: false, error, timedOut: true, aborted: false });
    this.handOverLate();
  }

  private abort(reason: unknown): void {
    const error = new LeaseholdError('ERR_ABORTED', 'the operation was aborted', {
      cause: reason,
    });
    this.abortStore(error);
    this.finish({ ok: false, error, timedOut: false, aborted: true });
    this.handOverLate();
  }

  private abortStore(reason: unknown): void {
    this.abortedWith = reason;
    this.controller?.abort(reason);
  }

  private handOverLate(): void {
    if (this.pending === undefined) this.lateOwed = true;
    else this.onLate?.(this.pending);
  }

  private finish(settled: Settled<T>): void {
    if (this.done) return;
    this.done = true;
    this.timeouts?.remove(this);
    this.unsubscribe?.();
    this.resolve?.(settled);
  }
}

/** True for errors that are the caller's fault and must surface, not become `unavailable`. */
export function isProgrammerError(err: unknown): boolean {
  return isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') || isLeaseholdError(err, 'ERR_PROTOCOL');
}

/** A settled store request's value; its error rethrown, as `ERR_UNAVAILABLE` unless typed. */
export function unwrapSettled<T>(storeKind: string, settled: Settled<T>): T {
  if (settled.ok) return settled.value;
  if (isLeaseholdError(settled.error)) throw settled.error;
  throw new LeaseholdError(
    'ERR_UNAVAILABLE',
    `store ${storeKind} could not answer: ${String(settled.error)}`,
    { cause: settled.error },
  );
}
