import type { RedisOptions } from 'ioredis';
import { invalidArgument } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/events.js';
import { booleanOption, integerOption, requireObject } from '../../core/runtime/options.js';
import type { RedisClient } from '../../drivers/redis/client.js';
import type { EvictionCheck } from './eviction-check.js';
import type { WakeMode } from './notify.js';

/** Options for {@link RedisLeaseStore}. */
export interface RedisLeaseStoreOptions {
  /**
   * Your ioredis client (standalone, Sentinel or Cluster) — the store never closes it — or a
   * `redis://` URL, for which the store opens (and on close, closes) its own client.
   */
  readonly redis: RedisClient | string;
  /**
   * Whether {@link RedisLeaseStore.close} also closes a client you passed as `redis` (for a
   * client made only for this store, e.g. a Cluster or Sentinel client). Defaults to `false`;
   * a client the store opened from a URL is always closed.
   */
  readonly closeClient?: boolean;
  /** ioredis options for a client opened from a URL. Defaults to ioredis' defaults. */
  readonly redisOptions?: RedisOptions;
  /**
   * Prepended to every Redis key this store writes (`<prefix>{<key>}:lease` …). Must not
   * contain `{` or `}`, which would change the Cluster hash slot. Defaults to `leasehold:`.
   */
  readonly prefix?: string;
  /** A pino-compatible logger for the start-up check and subscriber errors. Defaults to silent. */
  readonly logger?: Logger;
  /**
   * The check of `maxmemory-policy`: `warn` logs a warning unless it is `noeviction`,
   * `refuse` makes every operation fail with `ERR_UNAVAILABLE`, `off` skips it. It runs at
   * start-up and again after a reconnect; on a Cluster it asks every master and replica, and
   * nodes added later when the client refreshes its slot map (see {@link EvictionGuard}). A
   * server that disables `CONFIG` is tolerated (logged). Defaults to `warn`.
   */
  readonly evictionCheck?: EvictionCheck;
  /**
   * After each grant, wait (Redis `WAIT`) until this many replicas acknowledged it; when fewer
   * do in time, the grant is released and the acquire fails as unavailable. Narrows the
   * failover window, does not close it (see docs/redis.md). Defaults to 0 (no wait).
   */
  readonly replicas?: number;
  /** How long `WAIT` may block when `replicas` > 0. Defaults to 100 ms. */
  readonly replicationTimeoutMs?: number;
  /** How many local waiters a release wakes: `one` (round robin) or `all`. Defaults to `one`. */
  readonly wakeOnRelease?: WakeMode;
  /**
   * Send the lease commands issued within one event-loop turn together, in socket writes of
   * at most 8 commands (see {@link WriteCoalescer}): far fewer system calls when many leases
   * are in flight, no delay beyond the current turn. Defaults to true.
   */
  readonly coalesceWrites?: boolean;
  /**
   * Notice a change of the Redis server that answers (a replica promoted, a restart without
   * the data: its replication id changes) after each (re)connection, and raise the fencing
   * epoch before the next grant or renewal; leases held across are lost with reason
   * `failover`. Off on a Cluster client. Defaults to true.
   */
  readonly detectIncarnation?: boolean;
}

/** The defaults of {@link RedisLeaseStoreOptions}. */
export const REDIS_STORE_DEFAULTS = Object.freeze({
  prefix: 'leasehold:',
  evictionCheck: 'warn',
  replicas: 0,
  replicationTimeoutMs: 100,
  wakeOnRelease: 'one',
  coalesceWrites: true,
  detectIncarnation: true,
});

/** {@link RedisLeaseStoreOptions} checked, with the defaults filled in. */
export interface ResolvedRedisStoreOptions {
  /** The caller's client, or the URL of one the store opens (with `redisOptions`). */
  readonly redis:
    | { readonly kind: 'client'; readonly client: RedisClient; readonly close: boolean }
    | { readonly kind: 'url'; readonly url: string; readonly redisOptions: RedisOptions };
  readonly prefix: string;
  readonly logger: Logger;
  readonly evictionCheck: EvictionCheck;
  readonly replicas: number;
  readonly replicationTimeoutMs: number;
  readonly wakeOnRelease: WakeMode;
  readonly coalesceWrites: boolean;
  readonly detectIncarnation: boolean;
}

/** Checks `options` (`ERR_INVALID_ARGUMENT` naming the field) and fills in the defaults. */
export function resolveRedisStoreOptions(
  options: RedisLeaseStoreOptions,
): ResolvedRedisStoreOptions {
  requireObject(options);
  const prefix = options.prefix ?? REDIS_STORE_DEFAULTS.prefix;
  if (typeof prefix !== 'string' || /[{}]/.test(prefix) || !prefix.isWellFormed()) {
    throw invalidArgument('prefix', 'must be a string without { or }', prefix);
  }
  const evictionCheck = options.evictionCheck ?? REDIS_STORE_DEFAULTS.evictionCheck;
  if (!['warn', 'refuse', 'off'].includes(evictionCheck))
    throw invalidArgument('evictionCheck', "must be 'warn', 'refuse' or 'off'", evictionCheck);
  const replicas = integerOption(
    'replicas',
    options.replicas,
    REDIS_STORE_DEFAULTS.replicas,
    0,
    100,
  );
  const replicationTimeoutMs = integerOption(
    'replicationTimeoutMs',
    options.replicationTimeoutMs,
    REDIS_STORE_DEFAULTS.replicationTimeoutMs,
    1,
    60_000,
  );
  const wakeOnRelease = options.wakeOnRelease ?? REDIS_STORE_DEFAULTS.wakeOnRelease;
  if (wakeOnRelease !== 'one' && wakeOnRelease !== 'all')
    throw invalidArgument('wakeOnRelease', "must be 'one' or 'all'", wakeOnRelease);
  const logger = options.logger ?? silentLogger;
  let redis: ResolvedRedisStoreOptions['redis'];
  if (typeof options.redis === 'string') {
    redis = { kind: 'url', url: options.redis, redisOptions: options.redisOptions ?? {} };
  } else if (
    typeof options.redis === 'object' &&
    options.redis !== null &&
    typeof options.redis.evalsha === 'function'
  ) {
    redis = {
      kind: 'client',
      client: options.redis,
      close: booleanOption('closeClient', options.closeClient, false),
    };
  } else {
    throw invalidArgument('redis', 'must be an ioredis client or a redis:// URL', options.redis);
  }
  const coalesceWrites = booleanOption(
    'coalesceWrites',
    options.coalesceWrites,
    REDIS_STORE_DEFAULTS.coalesceWrites,
  );
  return {
    redis,
    prefix,
    logger,
    evictionCheck: evictionCheck,
    replicas,
    replicationTimeoutMs,
    wakeOnRelease,
    coalesceWrites,
    detectIncarnation: booleanOption(
      'detectIncarnation',
      options.detectIncarnation,
      REDIS_STORE_DEFAULTS.detectIncarnation,
    ),
  };
}
