import { systemClock } from '../core/runtime/clock.js';
import { LeaseholdError } from '../core/errors.js';
import type { AcquireAsk } from '../core/client-context.js';
import type { WaitQueues } from '../core/key-waiters.js';
import type { LeaseStore, StoreAcquireRequest, StoreAcquireResult } from '../core/store.js';
import { waitForKey, type WaitTurn } from '../core/wait-loop.js';

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
  /** Called once when the request is parked in the key's queue (see `waitForKey`). */
  readonly parked?: () => void;
}

/**
 * A grant after waiting, with when the store request that granted it was sent: the lease's
 * validity at the store runs from no earlier than that.
 */
export type WaitedGrant = Extract<StoreAcquireResult, { status: 'acquired' }> & {
  readonly sentAt: number;
};

/** A server-side wait's answer: a grant, or busy when the wait ran out. */
export type WaitedAcquireResult = WaitedGrant | Extract<StoreAcquireResult, { status: 'busy' }>;

/** What a request waiting in the server asks for: the store request it sends when it tries. */
export interface ServerAsk extends AcquireAsk {
  readonly storeRequest: StoreAcquireRequest;
}

/**
 * What a release through this server hands to the head waiter of the key (`hand-off.ts`):
 * the grant, and how to end it at the store if the waiter has gone meanwhile.
 */
export interface ServerGrant {
  readonly grant: WaitedGrant;
  release(): Promise<unknown>;
}

/** The server's queues of waiting requests, by key. */
export type ServerWaitQueues = WaitQueues<ServerGrant, ServerAsk>;

const PENDING: WaitTurn<never> = Object.freeze({ kind: 'pending' });

const cancelled = (): LeaseholdError =>
  new LeaseholdError('ERR_ABORTED', 'the request was cancelled');

/**
 * Acquires `request.key` at the store, waiting up to `waitMs` for a busy key, through the
 * client's own wait loop: parked in the key's queue in `waiting` (one store subscription per
 * key; a notification wakes only the first waiter), re-checked once the subscription is
 * live, and woken by a notification, the holder's expiry or a jittered backstop poll; only the
 * head of the queue tries at the store, so the requests of one server are granted in arrival
 * order. The
 * same lease id is used for every attempt, so an attempt whose answer was lost is
 * idempotent. Throws `ERR_ABORTED` when `signal` fires and whatever the store throws when
 * unreachable (a failed subscription included).
 */
export function acquireWaiting(
  store: LeaseStore,
  waiting: ServerWaitQueues,
  request: StoreAcquireRequest,
  options: WaitingAcquireOptions,
): Promise<WaitedAcquireResult> {
  const { signal } = options;
  const startedAt = performance.now();
  const storeOptions = { timeoutMs: options.requestTimeoutMs, signal };
  const attempt = async (): Promise<WaitTurn<WaitedAcquireResult>> => {
    const sentAt = performance.now();
    const answer = await options.time('acquire', () => store.tryAcquire(request, storeOptions));
    if (answer.status === 'acquired') {
      return { kind: 'done', acquired: true, result: { ...answer, sentAt } };
    }
    return { kind: 'busy', busy: answer };
  };
  return waitForKey<WaitedAcquireResult, ServerGrant, ServerAsk>({
    // No lease lives in the server: no drift or renewal to carry.
    ask: {
      key: request.key,
      ttlMs: request.ttlMs,
      value: request.value,
      driftMs: 0,
      renewEveryMs: undefined,
      storeRequest: request,
    },
    startedAt,
    until: startedAt + options.waitMs,
    signal,
    queues: waiting,
    clock: systemClock,
    now: () => performance.now(),
    random: Math.random,
    pollIntervalMs: options.pollMs,
    watch: (notify) =>
      store.watch(request.key, notify).then(
        (unwatch) => ({ ok: true, value: unwatch }),
        (error: unknown) => ({ ok: false, error, timedOut: false, aborted: false }),
      ),
    watchFailed: (error) => {
      throw error;
    },
    pendingMs: options.requestTimeoutMs,
    turn: (waiter) => {
      // A release through this server may have handed the key to us (or is doing so).
      const delivered = waiter?.take();
      if (delivered !== undefined) return { kind: 'done', acquired: true, result: delivered.grant };
      if (waiter?.claimed === true) return PENDING;
      return attempt();
    },
    gaveUp: (busy) => busy,
    aborted: cancelled,
    ...(options.parked === undefined ? {} : { parked: options.parked }),
  });
}
