import { Redis, type RedisOptions } from 'ioredis';
import { invalidArgument, isLeaseholdError, LeaseholdError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/events.js';
import type {
  HandOffLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
  WatchOptions,
} from '../../core/store.js';
import type { LeaseState, StoreCapabilities } from '../../core/types.js';
import {
  runAcquire,
  runHandOff,
  runInspect,
  runRelease,
  runRenew,
  type AcquireReply,
  type LeaseKeys,
  type RedisClient,
} from './scripts.js';
import { EpochFloorCache, epochKey } from './epoch.js';
import { EvictionGuard, isCluster, type EvictionCheck } from './eviction-check.js';
import { ReleaseSubscriber, type WakeMode } from './watchers.js';
import { WriteCoalescer } from './write-coalescing.js';

export type { EvictionCheck } from './eviction-check.js';

/** Options for {@link RedisLeaseStore}. */
export interface RedisLeaseStoreOptions {
  /**
   * Your ioredis client (standalone, Sentinel or Cluster) — the store never closes it — or a
   * `redis://` URL, for which the store opens (and on close, closes) its own client.
   */
  readonly redis: RedisClient | string;
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
}

const CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'store',
  // Asynchronous replication and persistence off can lose the record; the TIME floor keeps
  // tokens growing under the documented assumptions, which is less than a guarantee.
  tokenDurability: 'best_effort',
  watch: 'push',
  sharedAcrossProcesses: true,
  minTtlMs: 1,
  ttlGranularityMs: 1,
  tokenBlocks: true,
});

/** The defaults of {@link RedisLeaseStoreOptions}. */
export const REDIS_STORE_DEFAULTS = Object.freeze({
  prefix: 'leasehold:',
  evictionCheck: 'warn',
  replicas: 0,
  replicationTimeoutMs: 100,
  wakeOnRelease: 'one',
  coalesceWrites: true,
});

/**
 * A lease store on Redis (5 or later; standalone, Sentinel or Cluster), through ioredis 5.
 *
 * - Acquire, renew and release are each one Lua script (EVALSHA, EVAL on NOSCRIPT): atomic at
 *   the server. Expiry and token floors come from Redis `TIME`, read inside the script; no
 *   client clock is ever compared. A busy answer only reads.
 * - Keys: one hash per lease key, `<prefix>{<key>}:lease`, holding the last token and the
 *   live holder (lease id, owner, expiry, value). It never expires, so the token never
 *   resets; being one key, record and counter are always in one Cluster slot. The
 *   `{<key>}` hash tag lets your own keys for that resource share the slot.
 * - Tokens: `max(last + 1, TIME_ms × 1024)`. After Redis loses data (restart without
 *   persistence, failover to a replica that missed writes) the floor from server time still
 *   exceeds earlier tokens, provided a key never used 1024 tokens within one ms and the
 *   server clock (of the new primary) did not step back. Hence `tokenDurability: 'best_effort'`.
 *   A grant that reserves a token block (decision 007) counts as that many tokens: `last` is
 *   the top of the previous grant's block (the record's `top` field).
 * - Fencing epoch (decision 011): after Redis lost writes, `leasehold epoch` stores a floor in
 *   `<prefix>epoch` and raises every record to it; the store passes it to every grant, so
 *   keys without a record start above it too. Redis keeps no trace of lost writes, so the
 *   store cannot notice a restore by itself.
 * - Asynchronous failover can lose a *grant*: two holders may both believe they hold the key
 *   for up to one TTL. The tokens still order them, so a fence at the resource
 *   (`RedisFence`, the Postgres fence …) rejects the older one. That fence is what makes
 *   Redis leases safe; the lease alone is not.
 * - Waiting: a release publishes on `<prefix>{<key>}:released`; one subscriber connection per
 *   store wakes local waiters.
 * - Errors from Redis reject with `ERR_UNAVAILABLE` (the client answers `unavailable`).
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { LeaseClient } from 'leasehold';
 * import { RedisLeaseStore } from 'leasehold/redis';
 *
 * const store = new RedisLeaseStore({ redis: new Redis('redis://127.0.0.1:6379') });
 * await store.ready(); // optional: runs the maxmemory-policy check now
 * const client = new LeaseClient({ store });
 */
export class RedisLeaseStore implements HandOffLeaseStore {
  readonly kind = 'redis';
  readonly capabilities = CAPABILITIES;
  readonly prefix: string;
  private readonly redis: RedisClient;
  private readonly ownsClient: boolean;
  private readonly logger: Logger;
  private readonly replicas: number;
  private readonly replicationTimeoutMs: number;
  private readonly wake: WakeMode;
  private readonly check: Promise<void>;
  private readonly eviction: EvictionGuard | undefined;
  private checked = false;
  private subscriber: ReleaseSubscriber | undefined;
  private readonly coalescer: WriteCoalescer | undefined;
  /** The fencing epoch's floor, passed to every grant (see epoch.ts). */
  private readonly epoch: EpochFloorCache;
  private closed = false;

  constructor(options: RedisLeaseStoreOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    const prefix = options.prefix ?? REDIS_STORE_DEFAULTS.prefix;
    if (typeof prefix !== 'string' || /[{}]/.test(prefix) || !prefix.isWellFormed()) {
      throw invalidArgument('prefix', 'must be a string without { or }', prefix);
    }
    this.prefix = prefix;
    const evictionCheck = options.evictionCheck ?? REDIS_STORE_DEFAULTS.evictionCheck;
    if (!['warn', 'refuse', 'off'].includes(evictionCheck))
      throw invalidArgument('evictionCheck', "must be 'warn', 'refuse' or 'off'", evictionCheck);
    const replicas = options.replicas ?? REDIS_STORE_DEFAULTS.replicas;
    if (!Number.isInteger(replicas) || replicas < 0 || replicas > 100)
      throw invalidArgument('replicas', 'must be an integer from 0 to 100', replicas);
    this.replicas = replicas;
    const waitMs = options.replicationTimeoutMs ?? REDIS_STORE_DEFAULTS.replicationTimeoutMs;
    if (!Number.isInteger(waitMs) || waitMs < 1 || waitMs > 60_000)
      throw invalidArgument('replicationTimeoutMs', 'must be an integer from 1 to 60000', waitMs);
    this.replicationTimeoutMs = waitMs;
    const wake = options.wakeOnRelease ?? REDIS_STORE_DEFAULTS.wakeOnRelease;
    if (wake !== 'one' && wake !== 'all')
      throw invalidArgument('wakeOnRelease', "must be 'one' or 'all'", wake);
    this.wake = wake;
    this.logger = options.logger ?? silentLogger;
    if (typeof options.redis === 'string') {
      this.redis = new Redis(options.redis, options.redisOptions ?? {});
      this.ownsClient = true;
      // Without a listener ioredis prints every reconnect failure; operations still reject.
      this.redis.on('error', (err: unknown) => {
        this.logger.debug({ err: String(err) }, 'redis connection error');
      });
    } else if (
      typeof options.redis === 'object' &&
      options.redis !== null &&
      typeof options.redis.evalsha === 'function'
    ) {
      this.redis = options.redis;
      this.ownsClient = false;
    } else {
      throw invalidArgument('redis', 'must be an ioredis client or a redis:// URL', options.redis);
    }
    const coalesce = options.coalesceWrites ?? REDIS_STORE_DEFAULTS.coalesceWrites;
    if (typeof coalesce !== 'boolean')
      throw invalidArgument('coalesceWrites', 'must be a boolean', coalesce);
    this.coalescer = coalesce ? new WriteCoalescer(this.redis) : undefined;
    this.epoch = new EpochFloorCache(this.redis, epochKey(prefix));
    this.eviction =
      evictionCheck === 'off'
        ? undefined
        : new EvictionGuard(this.redis, evictionCheck, this.logger);
    this.check =
      this.eviction === undefined
        ? Promise.resolve()
        : this.eviction.start().finally(() => {
            this.checked = true;
          });
    if (evictionCheck === 'off') this.checked = true;
    // ready() reports the outcome; unobserved, a failed check must not crash the process.
    this.check.catch(() => undefined);
  }

  /**
   * Resolves once the start-up check (`maxmemory-policy`) has run and the fencing epoch's
   * floor has been read; rejects with `ERR_UNAVAILABLE` when `evictionCheck: 'refuse'` found
   * an unsafe policy or Redis did not answer.
   */
  async ready(): Promise<void> {
    await this.check;
    if (this.eviction?.refused) throw this.eviction.refused;
    // The fencing epoch's floor, which the first grant would otherwise wait for.
    try {
      await this.epoch.current();
    } catch (err) {
      throw this.wrap(err, 'reading the fencing epoch');
    }
  }

  async tryAcquire(
    request: StoreAcquireRequest,
    _options?: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    if (this.redis.status !== 'ready') await this.connection(_options);
    if (!this.checked) await this.check;
    this.gate();
    const keys = this.keysOf(request.key);
    let reply;
    try {
      const floor = this.epoch.current();
      const epochFloor = typeof floor === 'bigint' ? floor : await floor;
      this.coalescer?.hold();
      reply = await runAcquire(
        this.redis,
        keys,
        request.leaseId,
        request.ownerId,
        request.ttlMs,
        request.value,
        request.tokenBlock,
        epochFloor,
      );
    } catch (err) {
      throw this.wrap(err, 'acquire');
    }
    return this.acquireResult(request, keys, reply);
  }

  /** {@link HandOffLeaseStore}: release `release`, then an acquire attempt, in one script. */
  async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    _options?: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    if (this.redis.status !== 'ready') await this.connection(_options);
    if (!this.checked) await this.check;
    this.gate();
    const keys = this.keysOf(acquire.key);
    let reply;
    try {
      const floor = this.epoch.current();
      const epochFloor = typeof floor === 'bigint' ? floor : await floor;
      this.coalescer?.hold();
      reply = await runHandOff(
        this.redis,
        keys,
        release,
        acquire.leaseId,
        acquire.ownerId,
        acquire.ttlMs,
        acquire.value,
        acquire.tokenBlock,
        epochFloor,
      );
    } catch (err) {
      throw this.wrap(err, 'hand-off');
    }
    return {
      released: reply.released ? 'released' : 'not_owner',
      acquired: await this.acquireResult(acquire, keys, reply.acquire),
    };
  }

  /**
   * The store's answer for a script's reply. A promise only while `WAIT` for replicas is
   * pending: returning a promise from an async method costs extra microtask turns per call.
   */
  private acquireResult(
    request: StoreAcquireRequest,
    keys: LeaseKeys,
    reply: AcquireReply,
  ): StoreAcquireResult | Promise<StoreAcquireResult> {
    if (!reply.granted) {
      return {
        status: 'busy',
        holder: reply.holder,
        retryAfterMs: reply.holder.remainingMs,
      };
    }
    this.subscriber?.noteGranted(keys.channel);
    const result: StoreAcquireResult =
      reply.serverMs === undefined
        ? { status: 'acquired', token: reply.token }
        : {
            status: 'acquired',
            token: reply.token,
            expiresAtWallMs: reply.serverMs + request.ttlMs,
          };
    if (this.replicas === 0) return result;
    return this.awaitReplication(request, reply.token).then(() => result);
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    _options?: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    if (this.redis.status !== 'ready') await this.connection(_options);
    if (!this.checked) await this.check;
    this.gate();
    this.coalescer?.hold();
    let serverMs;
    try {
      serverMs = await runRenew(
        this.redis,
        this.keysOf(lease.key),
        lease.leaseId,
        lease.token,
        lease.ttlMs,
      );
    } catch (err) {
      throw this.wrap(err, 'renew');
    }
    return serverMs === undefined
      ? { status: 'lost' }
      : { status: 'renewed', expiresAtWallMs: serverMs + lease.ttlMs };
  }

  async release(lease: StoreLeaseRef, _options?: StoreRequestOptions): Promise<StoreReleaseResult> {
    if (this.redis.status !== 'ready') await this.connection(_options);
    if (!this.checked) await this.check;
    this.gate();
    this.coalescer?.hold();
    let released;
    try {
      released = await runRelease(this.redis, this.keysOf(lease.key), lease.leaseId, lease.token);
    } catch (err) {
      throw this.wrap(err, 'release');
    }
    return released ? { status: 'released' } : { status: 'not_owner' };
  }

  async inspect(key: string, _options?: StoreRequestOptions): Promise<LeaseState> {
    if (this.redis.status !== 'ready') await this.connection(_options);
    if (!this.checked) await this.check;
    this.gate();
    try {
      const state = await runInspect(this.redis, this.keysOf(key));
      return { key, lastToken: state.lastToken, holder: state.holder };
    } catch (err) {
      throw this.wrap(err, 'inspect');
    }
  }

  /**
   * Live leases under `prefix`, in key order. Uses `SCAN` over the keyspace (every master of
   * a Cluster): an observer's tool, O(keys in Redis), not for hot paths.
   */
  async list(prefix: string, limit: number, _options?: StoreRequestOptions): Promise<LeaseState[]> {
    if (this.redis.status !== 'ready') await this.connection(_options);
    if (!this.checked) await this.check;
    this.gate();
    try {
      const pattern = `${globEscape(`${this.prefix}{${prefix}`)}*${globEscape('}:lease')}`;
      const names = new Set<string>();
      for (const node of nodesOf(this.redis)) {
        let cursor = '0';
        do {
          const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
          cursor = next;
          for (const name of batch) names.add(name);
        } while (cursor !== '0');
      }
      const head = `${this.prefix}{`;
      const keys = [...names]
        .map((n) => n.slice(head.length, n.length - '}:lease'.length))
        .filter((k) => k.startsWith(prefix))
        .sort(compareKeys);
      const out: LeaseState[] = [];
      for (const key of keys) {
        if (out.length >= limit) break;
        const state = await runInspect(this.redis, this.keysOf(key));
        if (state.holder !== undefined)
          out.push({ key, lastToken: state.lastToken, holder: state.holder });
      }
      return out;
    } catch (err) {
      throw this.wrap(err, 'list');
    }
  }

  async watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch> {
    if (this.redis.status !== 'ready') await this.connection(undefined);
    if (!this.checked) await this.check;
    this.gate();
    this.subscriber ??= new ReleaseSubscriber(this.redis, this.wake, this.logger);
    try {
      return await this.subscriber.watch(
        this.keysOf(key).channel,
        onChange,
        options?.observer === true,
      );
    } catch (err) {
      throw this.wrap(err, 'watch');
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.eviction?.stop();
    await this.subscriber?.close();
    if (this.ownsClient) {
      // QUIT on a connection that is down would wait in the offline queue for a reconnect.
      if (this.redis.status === 'ready') await this.redis.quit().catch(() => undefined);
      this.redis.disconnect();
    }
  }

  /** The Redis key names of `key` (for operators and tests). */
  keysOf(key: string): LeaseKeys {
    const base = `${this.prefix}{${key}}`;
    return { record: `${base}:lease`, channel: `${base}:released` };
  }

  /**
   * Throws once the store is closed or its start-up check refused it. Callers first await
   * the start-up check only while it is pending: an `await` per request is a microtask and a
   * promise on the hot path. `options.signal` is not read: the client never sends an aborted
   * request, and reading it makes the client create an AbortController per request.
   */
  /**
   * Waits, before sending anything, for a client that is still connecting or reconnecting:
   * until it is ready, or until its next connection error, which is thrown with its cause
   * (`connect ECONNREFUSED 127.0.0.1:6390`) instead of the command waiting in ioredis' offline
   * queue until the request times out with no reason given. Nothing was sent, so nothing can
   * happen later at Redis. Bounded by the request's signal.
   */
  private connection(options: StoreRequestOptions | undefined): Promise<void> {
    const redis = this.redis;
    if (!['connecting', 'connect', 'reconnecting'].includes(redis.status)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const signal = options?.signal;
      const done = (): void => {
        redis.off('ready', onReady);
        redis.off('error', onError);
        signal?.removeEventListener('abort', onAbort);
      };
      const onReady = (): void => {
        done();
        resolve();
      };
      const onError = (err: unknown): void => {
        done();
        const why = err instanceof Error ? err.message : String(err);
        reject(
          new LeaseholdError('ERR_UNAVAILABLE', `Redis is not reachable: ${why}`, { cause: err }),
        );
      };
      const onAbort = (): void => {
        done();
        reject(
          new LeaseholdError('ERR_ABORTED', 'the operation was aborted', { cause: signal?.reason }),
        );
      };
      redis.on('ready', onReady);
      redis.on('error', onError);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private gate(): void {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the Redis lease store was closed');
    if (this.eviction?.refused) throw this.eviction.refused;
  }

  private async awaitReplication(request: StoreAcquireRequest, token: bigint): Promise<void> {
    let acked: number;
    try {
      acked = await this.redis.wait(this.replicas, this.replicationTimeoutMs);
    } catch (err) {
      acked = -1;
      this.logger.warn({ key: request.key, err: String(err) }, 'redis WAIT failed');
    }
    if (acked >= this.replicas) return;
    // A grant that only the primary knows can vanish on failover: give it back rather than
    // hand the caller a lease we could not make durable enough.
    await runRelease(this.redis, this.keysOf(request.key), request.leaseId, token).catch(
      () => undefined,
    );
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `only ${Math.max(0, acked)} of ${this.replicas} replicas acknowledged the grant within ${this.replicationTimeoutMs}ms`,
    );
  }

  private wrap(err: unknown, op: string): LeaseholdError {
    if (isLeaseholdError(err)) return err;
    if (err instanceof TypeError) {
      return new LeaseholdError('ERR_PROTOCOL', `Redis ${op}: ${err.message}`, { cause: err });
    }
    return new LeaseholdError('ERR_UNAVAILABLE', `Redis ${op} failed: ${String(err)}`, {
      cause: err,
    });
  }
}

function nodesOf(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
