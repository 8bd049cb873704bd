import { systemClock } from '../core/clock.js';
import { LeaseholdError } from '../core/errors.js';
import type { WaitQueues } from '../core/key-waiters.js';
import type { LeaseStore, StoreAcquireRequest, StoreAcquireResult } from '../core/store.js';
import { waitForKey } from '../core/wait-loop.js';

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

const cancelled = (): LeaseholdError =>
  new LeaseholdError('ERR_ABORTED', 'the request was cancelled');

/**
 * Acquires `request.key` at the store, waiting up to `waitMs` for a busy key, through the
 * client's own wait loop: parked in the key's queue in `waiting` (one store subscription per
 * key; a notification wakes only the first waiter), re-checked once the subscription is
 * live, and woken by a notification, the holder's expiry or a jittered backstop poll. The
 * same lease id is used for every attempt, so an attempt whose answer was lost is
 * idempotent. Throws `ERR_ABORTED` when `signal` fires and whatever the store throws when
 * unreachable (a failed subscription included).
 */
export function acquireWaiting(
  store: LeaseStore,
  waiting: WaitQueues,
  request: StoreAcquireRequest,
  options: WaitingAcquireOptions,
): Promise<StoreAcquireResult> {
  const { signal } = options;
  const startedAt = performance.now();
  const storeOptions = { timeoutMs: options.requestTimeoutMs, signal };
  return waitForKey<StoreAcquireResult>({
    // The server never hands a key over between requests: no drift or renewal to carry.
    ask: { ...request, driftMs: 0, renewEveryMs: undefined },
    startedAt,
    until: startedAt + options.waitMs,
    signal,
    queues: waiting,
    clock: systemClock,
    now: () => performance.now(),
    random: Math.random,
    pollIntervalMs: options.pollMs,
    pendingMs: options.requestTimeoutMs,
    watch: (notify) =>
      store.watch(request.key, notify).then(
        (unwatch) => ({ ok: true, value: unwatch }),
        (error: unknown) => ({ ok: false, error, timedOut: false, aborted: false }),
      ),
    watchFailed: (error) => {
      throw error;
    },
    turn: async () => {
      const answer = await options.time('acquire', () => store.tryAcquire(request, storeOptions));
      if (answer.status === 'acquired') return { kind: 'done', acquired: true, result: answer };
      return { kind: 'busy', busy: answer };
    },
    gaveUp: (busy) => busy,
    aborted: cancelled,
  });
}
