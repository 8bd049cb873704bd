import { systemClock, type Clock } from './runtime/clock.js';
import { parseDuration, type Duration } from './duration.js';
import { invalidArgument } from './errors.js';
import { silentLogger, type Logger } from './events.js';
import { defaultOwnerId } from './ids.js';
import { resolveFences, type FenceClaim, type ResolvedClaim } from './fence-claim.js';
import type { AcquireResult, ClaimFailedResult, LossReason } from './results.js';
import { booleanOption, integerOption, ratioOption, requireObject } from './runtime/options.js';
import type { LeaseStore } from './store.js';
import type { Token } from './types.js';
import {
  checkSignal,
  LIMITS,
  validatePlainKey,
  validateOwnerId,
  validateRenewEvery,
  validateTimeout,
  validateTtl,
  validateValue,
  validateWait,
} from './validate.js';

/** Options for {@link LeaseClient}. */
export interface LeaseClientOptions {
  /** The lease authority. The client never closes it; you do. */
  readonly store: LeaseStore;
  /** Who this client is, for holders' info and logs. Defaults to `host/pid/random`. */
  readonly ownerId?: string;
  /** Monotonic time and timers. Defaults to `performance.now()` and Node timers. */
  readonly clock?: Clock;
  /**
   * The fraction of the TTL assumed lost to clock-rate differences between this machine and
   * the store; each deadline is shortened by `ceil(ttl × ratio) + 2ms`. Defaults to 0.01.
   */
  readonly clockDriftRatio?: number;
  /** Timeout for acquire, release and inspect requests. Defaults to `'5s'`. */
  readonly requestTimeout?: Duration;
  /**
   * While waiting, how often to re-check without a notification: only a backstop. Defaults
   * to `'2s'` on stores with push notifications, `'250ms'` on stores without.
   */
  readonly pollInterval?: Duration;
  /** A pino-compatible logger. Defaults to silent. */
  readonly logger?: Logger;
  /** Random numbers in [0, 1) for jitter. Defaults to `Math.random`. */
  readonly random?: () => number;
  /**
   * On stores that can release and acquire in one step (memory, SQLite, Redis), a lease of
   * this client that is released while another acquisition of this client waits for the key
   * passes it straight to that waiter: one round trip, no notification. This many times in a
   * row at most; then one ordinary release lets waiters in other processes compete. 0 turns
   * hand-off off (strict release-then-compete). Defaults to 16.
   */
  readonly maxHandOffRun?: number;
  /**
   * On stores with token blocks (`capabilities.tokenBlocks`: memory, SQLite, PostgreSQL, Redis,
   * and HTTP when the server's store has them; not etcd), each store grant
   * reserves this many more tokens, and a lease released while another acquisition of this
   * client waits for the key (same TTL and value, waiting since before the store lease's
   * grant or last confirmed renewal was sent) passes to that waiter **without a store
   * call**: the waiter's lease acts under the same store lease (same lease id, expiry and
   * renewals) with the next token of the block, so every holder still has a larger token
   * than every one issued before it began waiting — even if the store's clock jumps — and
   * fences work unchanged (decision 007). Counts toward `maxHandOffRun`. From 0 to 63;
   * defaults to 0 (off: every holder is a store grant).
   */
  readonly localSuccessors?: number;
}

/** Options for one {@link LeaseClient.acquire}. */
export interface AcquireOptions {
  /** How long the store keeps the lease without renewal (100ms–24h). Required. */
  readonly ttl: Duration;
  /** How long to wait for a busy key (0–24h). Defaults to 0: answer `busy` at once. */
  readonly wait?: Duration;
  /** Cancels a waiting acquire (throws `ERR_ABORTED`); a grant that arrives late is released. */
  readonly signal?: AbortSignal;
  /** A small value stored with the lease (≤ 1 KiB), e.g. a leader's address. Defaults to none. */
  readonly value?: string;
  /** Renew in the background while held. Defaults to true. */
  readonly autoRenew?: boolean;
  /** Background renewal cadence, below the TTL. Defaults to a third of the TTL. */
  readonly renewEvery?: Duration;
  /**
   * Fences to install the new token on before the lease is handed over (claim before start,
   * DESIGN §4): each entry's `fence.claim(scope, token)` runs, all at once, right after the
   * grant. Once they all answered `applied`, no write with a lower token is accepted at any of
   * them, even before this owner's first write (I9). One round trip per fence per
   * acquisition. A refusal or an unreachable fence releases the lease and answers
   * `claim_failed` (see {@link ClaimFailedResult}). Defaults to none.
   *
   * @example
   * await client.acquire('report/july', { ttl: '30s', fences: [{ fence: pgFence }] });
   */
  readonly fences?: readonly FenceClaim[];
  /**
   * Lock-delay (0–1h): if this lease ends by **expiry** rather than release — its holder
   * crashed, paused or lost the store — the store refuses the key to everyone for this much
   * longer, answering `busy` with `reason: 'lock_delay'`, so requests the vanished holder left
   * in flight can drain before a new holder starts. Only on stores with
   * `capabilities.lockDelay` (elsewhere `ERR_INVALID_ARGUMENT`). Defaults to none.
   */
  readonly lockDelay?: Duration;
  /**
   * Take the key even during a lock-delay left by its last holder: for callers whose writes
   * are fenced, since the fence already refuses the old holder's late writes. Defaults to false.
   */
  readonly ignoreLockDelay?: boolean;
}

/** {@link AcquireOptions} that name no fences: the acquisition cannot answer `claim_failed`. */
export type AcquireOptionsWithoutFences = AcquireOptions & { readonly fences?: undefined };

/** The outcome of {@link LeaseClient.withLease}. */
export type WithLeaseResult<T> =
  /** `fn` returned while the lease was still valid. */
  | { readonly status: 'completed'; readonly value: T; readonly token: Token }
  /** `fn` returned, but the lease was lost while it ran: its unfenced effects may be stale. */
  | {
      readonly status: 'lost';
      readonly value: T;
      readonly token: Token;
      readonly reason: LossReason;
    }
  | Exclude<AcquireResult, { status: 'acquired' }>;

/** The outcome of {@link LeaseClient.withLease} with `fences`: it may also be `claim_failed`. */
export type FencedWithLeaseResult<T> = WithLeaseResult<T> | ClaimFailedResult;

/** The defaults of {@link LeaseClientOptions}. */
export const CLIENT_DEFAULTS = Object.freeze({
  clockDriftRatio: 0.01,
  clockDriftFixedMs: 2,
  requestTimeoutMs: 5000,
  pollIntervalPushMs: 2000,
  pollIntervalNoneMs: 250,
  maxHandOffRun: 16,
  localSuccessors: 0,
});

/** {@link LeaseClientOptions} checked, with every default filled in. */
export interface ResolvedClientOptions {
  readonly store: LeaseStore;
  readonly ownerId: string;
  readonly clock: Clock;
  readonly driftRatio: number;
  readonly requestTimeoutMs: number;
  readonly pollIntervalMs: number;
  readonly logger: Logger;
  readonly random: () => number;
  readonly maxHandOffRun: number;
  /** Tokens each store grant reserves: 1 + local successors, 1 when the store cannot. */
  readonly tokenBlock: number;
}

/** What one acquisition asks for, checked; also what a hand-off needs to serve it. */
export interface ResolvedAcquire {
  readonly key: string;
  readonly ttlMs: number;
  readonly waitMs: number;
  /** The clock-drift allowance subtracted from every deadline of the lease. */
  readonly driftMs: number;
  readonly renewEveryMs: number | undefined;
  readonly value: string | undefined;
  readonly signal: AbortSignal | undefined;
  /** The fences to claim on once granted; undefined (the common case) when none. */
  readonly fences: readonly ResolvedClaim[] | undefined;
  readonly lockDelayMs?: number;
  readonly ignoreLockDelay?: boolean;
}

/** Checks client options and fills in the defaults; throws `ERR_INVALID_ARGUMENT` naming the field. */
export function resolveClientOptions(options: LeaseClientOptions): ResolvedClientOptions {
  requireObject(options);
  const store = options.store as LeaseStore | undefined;
  if (store === undefined || typeof store.tryAcquire !== 'function') {
    throw invalidArgument('store', 'must be a LeaseStore', store);
  }
  const d = CLIENT_DEFAULTS;
  // Checked in the order the fields are documented, so the first bad one is the one named.
  return {
    store,
    ownerId: options.ownerId === undefined ? defaultOwnerId() : validateOwnerId(options.ownerId),
    clock: options.clock ?? systemClock,
    driftRatio: ratioOption('clockDriftRatio', options.clockDriftRatio, d.clockDriftRatio, 0, 0.5),
    requestTimeoutMs:
      options.requestTimeout === undefined
        ? d.requestTimeoutMs
        : validateTimeout(options.requestTimeout, 'requestTimeout'),
    pollIntervalMs:
      options.pollInterval === undefined
        ? store.capabilities.watch === 'push'
          ? d.pollIntervalPushMs
          : d.pollIntervalNoneMs
        : validateTimeout(options.pollInterval, 'pollInterval'),
    logger: options.logger ?? silentLogger,
    random: options.random ?? Math.random,
    maxHandOffRun: integerOption(
      'maxHandOffRun',
      options.maxHandOffRun,
      d.maxHandOffRun,
      0,
      1_000_000,
    ),
    tokenBlock: tokenBlockOf(
      store,
      integerOption(
        'localSuccessors',
        options.localSuccessors,
        d.localSuccessors,
        0,
        LIMITS.maxTokenBlock - 1,
      ),
    ),
  };
}

/** A store grant reserves a token for each local successor, when the store has token blocks. */
function tokenBlockOf(store: LeaseStore, localSuccessors: number): number {
  return store.capabilities.tokenBlocks === true ? localSuccessors + 1 : 1;
}

/**
 * Checks one acquisition's key and options against the store's limits; throws
 * `ERR_INVALID_ARGUMENT` (nothing is sent) or `ERR_ABORTED` for a signal already aborted.
 */
export function resolveAcquire(
  key: unknown,
  options: AcquireOptions,
  store: LeaseStore,
  driftRatio: number,
  checkKey: (key: unknown) => string = validatePlainKey,
): ResolvedAcquire {
  requireObject(options, 'options', 'must be an object with a ttl');
  const k = checkKey(key);
  const ttlMs = validateTtl(options.ttl, store.capabilities.minTtlMs);
  const waitMs = validateWait(options.wait);
  const value = validateValue(options.value);
  const driftMs = Math.ceil(ttlMs * driftRatio) + CLIENT_DEFAULTS.clockDriftFixedMs;
  const windowMs = ttlMs - driftMs;
  let renewEveryMs: number | undefined;
  if (booleanOption('autoRenew', options.autoRenew, true)) {
    renewEveryMs =
      options.renewEvery === undefined
        ? Math.floor(ttlMs / 3)
        : validateRenewEvery(options.renewEvery, ttlMs, windowMs);
  } else if (options.renewEvery !== undefined) {
    throw invalidArgument(
      'renewEvery',
      'cannot be set when autoRenew is false',
      options.renewEvery,
    );
  }
  const signal = checkSignal(options.signal);
  const fences = options.fences === undefined ? undefined : resolveFences(options.fences, k);
  const lockDelayMs = resolveLockDelay(options.lockDelay, store);
  const ignoreLockDelay = booleanOption('ignoreLockDelay', options.ignoreLockDelay, false);
  return {
    key: k,
    ttlMs,
    waitMs,
    driftMs,
    renewEveryMs,
    value,
    signal,
    fences,
    ...(lockDelayMs === undefined ? {} : { lockDelayMs }),
    ...(ignoreLockDelay ? { ignoreLockDelay } : {}),
  };
}

/** The longest lock-delay: an hour keeps a crashed holder's key from staying shut for long. */
const MAX_LOCK_DELAY_MS = 3_600_000;

/** `lockDelay`: undefined for none (absent or 0); refused on a store that cannot keep it. */
function resolveLockDelay(value: unknown, store: LeaseStore): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseDuration('lockDelay', value);
  if (ms < 0 || ms > MAX_LOCK_DELAY_MS)
    throw invalidArgument('lockDelay', 'must be between 0 and 1h', value);
  if (ms === 0) return undefined;
  if (store.capabilities.lockDelay !== true) {
    throw invalidArgument(
      'lockDelay',
      `is not supported by the ${store.kind} store (capabilities.lockDelay is false)`,
      value,
    );
  }
  return ms;
}
