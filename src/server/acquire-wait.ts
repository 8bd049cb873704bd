import { systemClock } from '../core/clock.js';
import { LeaseholdError } from '../core/errors.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  Unwatch,
} from '../core/store.js';
import { Wakeup } from '../core/wakeup.js';

/** Options for one server-side acquisition. */
export interface WaitingAcquireOptions {
  /** How long to wait for a busy key; 0 answers at once. */
  readonly waitMs: number;
  /** Timeout of each store request. */
  readonly requestTimeoutMs: number;
  /** Backstop poll while waiting, in case a notification is missed. */
  readonly pollMs: number;
  /** Fires when the HTTP client goes away or the server shuts down. */
  readonly signal: AbortSignal;
  /** Times each store request (metrics). */
  readonly time: <T>(op: string, fn: () => Promise<T>) => Promise<T>;
}

/**
 * Acquires `request.key` at the store, waiting up to `waitMs` for a busy key: it subscribes
 * to the store's change notifications, re-checks once the subscription is live, and then
 * sleeps until a notification, the holder's expiry or a jittered backstop poll. The same
 * lease id is used for every attempt, so an attempt whose answer was lost is idempotent.
 * Throws `ERR_ABORTED` when `signal` fires and whatever the store throws when unreachable.
 */
export async function acquireWaiting(
  store: LeaseStore,
  request: StoreAcquireRequest,
  options: WaitingAcquireOptions,
): Promise<StoreAcquireResult> {
  const { signal } = options;
  const until = performance.now() + options.waitMs;
  const wakeup = new Wakeup(systemClock);
  let unwatch: Unwatch | undefined;
  let subscribed = false;
  try {
    for (;;) {
      if (signal.aborted) throw new LeaseholdError('ERR_ABORTED', 'the request was cancelled');
      const answer = await options.time('acquire', () =>
        store.tryAcquire(request, { timeoutMs: options.requestTimeoutMs, signal }),
      );
      if (answer.status === 'acquired') return answer;
      const left = until - performance.now();
      if (left <= 0) return answer;
      if (!subscribed) {
        subscribed = true;
        // A grant leaves the key held: only a change that may have freed it wakes us.
        unwatch = await store.watch(request.key, (change) => {
          if (change !== 'granted') wakeup.notify();
        });
        continue; // re-check now that a release cannot slip by unnoticed
      }
      const untilExpiry = answer.retryAfterMs + 1 + Math.floor(Math.random() * 5);
      const poll = Math.floor(options.pollMs * (0.8 + 0.4 * Math.random()));
      const why = await wakeup.wait(Math.max(1, Math.min(left, untilExpiry, poll)), signal);
      if (why === 'aborted') throw new LeaseholdError('ERR_ABORTED', 'the request was cancelled');
    }
  } finally {
    unwatch?.();
  }
}
