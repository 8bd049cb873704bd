import type { Clock } from './clock.js';
import { LeaseholdError, isLeaseholdError } from './errors.js';
import type { StoreRequestOptions } from './store.js';

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
 * Runs one store request under a timeout on the injected clock, and under the caller's
 * signal. Whichever comes first wins: a store answer that arrives after the timeout is
 * not used (the caller treats the request as failed) but is handed to `onLate`, so a late
 * grant can be cleaned up.
 */
export function boundedRequest<T>(
  clock: Clock,
  timeoutMs: number,
  outer: AbortSignal | undefined,
  run: (options: StoreRequestOptions) => Promise<T>,
  onLate?: (late: Promise<T>) => void,
): Promise<Settled<T>> {
  // The controller is made only if the store reads `signal`: most stores never do, and an
  // AbortController per request was a fifth of the client's CPU on a hot path.
  let controller: AbortController | undefined;
  let abortedWith: unknown;
  const options: StoreRequestOptions = {
    timeoutMs,
    get signal(): AbortSignal {
      if (controller === undefined) {
        controller = new AbortController();
        if (abortedWith !== undefined) controller.abort(abortedWith);
      }
      return controller.signal;
    },
  };
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
  const abortStore = (reason: unknown): void => {
    abortedWith = reason;
    controller?.abort(reason);
  };
  return new Promise<Settled<T>>((resolve) => {
    let done = false;
    const finish = (s: Settled<T>): void => {
      if (done) return;
      done = true;
      clock.clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
      resolve(s);
    };
    const timer = clock.setTimeout(() => {
      const error = new LeaseholdError(
        'ERR_UNAVAILABLE',
        `store did not answer within ${timeoutMs}ms`,
      );
      abortStore(error);
      finish({ ok: false, error, timedOut: true, aborted: false });
      if (onLate) onLate(pending);
    }, timeoutMs);
    const onAbort = (): void => {
      const error = new LeaseholdError('ERR_ABORTED', 'the operation was aborted', {
        cause: outer?.reason,
      });
      abortStore(error);
      finish({ ok: false, error, timedOut: false, aborted: true });
      if (onLate) onLate(pending);
    };
    outer?.addEventListener('abort', onAbort, { once: true });
    let pending: Promise<T>;
    try {
      pending = run(options);
    } catch (err) {
      pending = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    pending.then(
      (value) => finish({ ok: true, value }),
      (error: unknown) => finish({ ok: false, error, timedOut: false, aborted: false }),
    );
  });
}

/** True for errors that are the caller's fault and must surface, not become `unavailable`. */
export function isProgrammerError(err: unknown): boolean {
  return isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') || isLeaseholdError(err, 'ERR_PROTOCOL');
}
