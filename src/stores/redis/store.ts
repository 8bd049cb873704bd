import type { Logger } from '../../core/events.js';
import type {
  HandOffLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  BatchRenewingLeaseStore,
  StoreReleaseResult,
  StoreRenewRequest,
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
} from './scripts.js';
import { WriteCoalescer } from './batch.js';
import { openRedisClient } from './client.js';
import type { RedisClient } from '../../drivers/redis/client.js';
import type { EpochFloorCache } from './epoch.js';
import { RedisIncarnation } from './incarnation.js';
import { storeError } from './errors.js';
import { leaseKeys, scanLeaseKeys } from './keys.js';
import { ReleaseSubscriber, type WakeMode } from './notify.js';
import { resolveRedisStoreOptions, type RedisLeaseStoreOptions } from './options.js';
import { RedisReadiness } from './readiness.js';
import { renewManyOn } from './renew-many.js';
import { awaitReplication, type ReplicaAcks } from './replication.js';

const RELEASED: StoreReleaseResult = Object.freeze({ status: 'released' });
const NOT_OWNER: StoreReleaseResult = Object.freeze({ status: 'not_owner' });
const releaseResult = (released: boolean): StoreReleaseResult => (released ? RELEASED : NOT_OWNER);

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
  lockDelay: true,
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
 * - Fencing epoch (decision 011): `<prefix>epoch` holds a floor every grant passes, so keys
 *   without a record start above it too. After each (re)connection the store compares the
 *   server's replication id with `<prefix>incarnation` (incarnation.ts) and raises the epoch
 *   itself when another incarnation answers; a restore it cannot see needs `leasehold epoch`.
 * - A grant lost in a failover leaves two holders for up to one TTL; the tokens order them and
 *   a fence at the resource (`RedisFence` …) rejects the older one.
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
export class RedisLeaseStore implements HandOffLeaseStore, BatchRenewingLeaseStore {
  readonly kind = 'redis';
  readonly capabilities = CAPABILITIES;
  readonly prefix: string;
  private readonly redis: RedisClient;
  private readonly ownsClient: boolean;
  private readonly logger: Logger;
  private readonly acks: ReplicaAcks;
  private readonly wake: WakeMode;
  /** The one gate every operation passes before it sends (readiness.ts). */
  private readonly readiness: RedisReadiness;
  private subscriber: ReleaseSubscriber | undefined;
  private readonly coalescer: WriteCoalescer | undefined;
  private readonly holdWrites = (): void => this.coalescer?.hold();
  /** The fencing epoch's floor, passed to every grant (see epoch.ts). */
  private readonly epoch: EpochFloorCache;
  private readonly incarnation: RedisIncarnation;

  constructor(options: RedisLeaseStoreOptions) {
    const resolved = resolveRedisStoreOptions(options);
    const { prefix, evictionCheck } = resolved;
    this.prefix = prefix;
    this.acks = { replicas: resolved.replicas, timeoutMs: resolved.replicationTimeoutMs };
    this.wake = resolved.wakeOnRelease;
    this.logger = resolved.logger;
    const given = resolved.redis;
    this.ownsClient = given.kind === 'url' || given.close;
    this.redis =
      given.kind === 'url'
        ? openRedisClient(given.url, given.redisOptions, this.logger)
        : given.client;
    this.coalescer = resolved.coalesceWrites ? new WriteCoalescer(this.redis) : undefined;
    this.incarnation = new RedisIncarnation(this.redis, prefix, resolved, this.logger);
    this.epoch = this.incarnation.epoch;
    this.readiness = new RedisReadiness(this.redis, evictionCheck, this.logger);
  }

  /**
   * Resolves once the start-up check (`maxmemory-policy`) has run and the fencing epoch's
   * floor has been read; rejects with `ERR_UNAVAILABLE` when `evictionCheck: 'refuse'` found
   * an unsafe policy or Redis did not answer.
   */
  async ready(): Promise<void> {
    await this.readiness.started();
    // The fencing epoch's floor, which the first grant would otherwise wait for.
    try {
      await this.epoch.current();
    } catch (err) {
      throw storeError(err, 'reading the fencing epoch');
    }
  }

  tryAcquire(
    request: StoreAcquireRequest,
    options?: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    // Open, the floor at hand: no async frame (two promise steps per grant, decision 023).
    const floor = this.readiness.isOpen() ? this.epoch.current() : undefined;
    if (typeof floor !== 'bigint') {
      floor?.catch(() => undefined); // awaited again, and its failure reported, on the slow path
      return this.tryAcquireWhenOpen(request, options);
    }
    return this.acquireUnder(request, floor);
  }

  /** {@link tryAcquire} once the store is open and the epoch's floor read. */
  private async tryAcquireWhenOpen(
    request: StoreAcquireRequest,
    options: StoreRequestOptions | undefined,
  ): Promise<StoreAcquireResult> {
    await this.readiness.untilOpen(options);
    let epochFloor: bigint;
    try {
      epochFloor = await this.epoch.current();
    } catch (err) {
      throw storeError(err, 'acquire');
    }
    return this.acquireUnder(request, epochFloor);
  }

  /** One acquire script under the epoch's floor `epochFloor`. */
  private acquireUnder(
    request: StoreAcquireRequest,
    epochFloor: bigint,
  ): Promise<StoreAcquireResult> {
    try {
      this.readiness.gate();
      const keys = this.keysOf(request.key);
      this.coalescer?.hold();
      return runAcquire(
        this.redis,
        keys,
        request.leaseId,
        request.ownerId,
        request.ttlMs,
        request.value,
        request.tokenBlock,
        epochFloor,
        request,
      ).then(
        (reply) => this.acquireResult(request, keys, reply),
        (err: unknown) => {
          throw storeError(err, 'acquire');
        },
      );
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** {@link HandOffLeaseStore}: release `release`, then an acquire attempt, in one script. */
  async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    _options?: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    await this.readiness.untilOpen(_options);
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
        acquire,
      );
    } catch (err) {
      throw storeError(err, 'hand-off');
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
      if (reply.lockDelayLeftMs !== undefined) {
        const retryAfterMs = reply.lockDelayLeftMs;
        return { status: 'busy', holder: reply.holder, retryAfterMs, reason: 'lock_delay' };
      }
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
    if (this.acks.replicas === 0) return result;
    return awaitReplication(this.redis, this.acks, this.logger, keys, request, reply.token).then(
      () => result,
    );
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    _options?: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    await this.readiness.untilOpen(_options);
    await this.incarnation.pending();
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
      throw storeError(err, 'renew');
    }
    return serverMs === undefined
      ? this.incarnation.typed({ status: 'lost' }, lease.token)
      : { status: 'renewed', expiresAtWallMs: serverMs + lease.ttlMs };
  }

  /**
   * {@link BatchRenewingLeaseStore}: one renew-many.lua call for the batch on one node, one
   * per slot on a Cluster (renew-many.ts).
   */
  async renewMany(
    leases: readonly StoreRenewRequest[],
    _options?: StoreRequestOptions,
  ): Promise<readonly StoreRenewResult[]> {
    if (leases.length === 0) return [];
    await this.readiness.untilOpen(_options);
    await this.incarnation.pending();
    try {
      const answers = await renewManyOn(this.redis, this.prefix, leases, this.holdWrites);
      return this.incarnation.typedAll(answers, leases);
    } catch (err) {
      throw storeError(err, 'renew');
    }
  }

  release(lease: StoreLeaseRef, options?: StoreRequestOptions): Promise<StoreReleaseResult> {
    // Without an async frame when the store is open, as tryAcquire.
    if (!this.readiness.isOpen()) {
      return this.readiness.untilOpen(options).then(() => this.releaseNow(lease));
    }
    return this.releaseNow(lease);
  }

  private releaseNow(lease: StoreLeaseRef): Promise<StoreReleaseResult> {
    try {
      this.readiness.gate();
      this.coalescer?.hold();
      return runRelease(this.redis, this.keysOf(lease.key), lease.leaseId, lease.token).then(
        releaseResult,
        (err: unknown) => {
          throw storeError(err, 'release');
        },
      );
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  async inspect(key: string, _options?: StoreRequestOptions): Promise<LeaseState> {
    await this.readiness.untilOpen(_options);
    try {
      const state = await runInspect(this.redis, this.keysOf(key));
      return { key, lastToken: state.lastToken, holder: state.holder };
    } catch (err) {
      throw storeError(err, 'inspect');
    }
  }

  /**
   * Live leases under `prefix`, in key order. Uses `SCAN` over the keyspace (every master of
   * a Cluster, see keys.ts): an observer's tool, O(keys in Redis), not for hot paths.
   */
  async list(prefix: string, limit: number, _options?: StoreRequestOptions): Promise<LeaseState[]> {
    await this.readiness.untilOpen(_options);
    try {
      const keys = await scanLeaseKeys(this.redis, this.prefix, prefix);
      const out: LeaseState[] = [];
      for (const key of keys) {
        if (out.length >= limit) break;
        const state = await runInspect(this.redis, this.keysOf(key));
        if (state.holder !== undefined)
          out.push({ key, lastToken: state.lastToken, holder: state.holder });
      }
      return out;
    } catch (err) {
      throw storeError(err, 'list');
    }
  }

  async watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch> {
    await this.readiness.untilOpen(undefined);
    this.subscriber ??= new ReleaseSubscriber(this.redis, this.wake, this.logger);
    try {
      return await this.subscriber.watch(
        this.keysOf(key).channel,
        onChange,
        options?.observer === true,
      );
    } catch (err) {
      throw storeError(err, 'watch');
    }
  }

  async close(): Promise<void> {
    if (!this.readiness.close()) return;
    await this.subscriber?.close();
    if (this.ownsClient) {
      // QUIT on a connection that is down would wait in the offline queue for a reconnect.
      if (this.redis.status === 'ready') await this.redis.quit().catch(() => undefined);
      this.redis.disconnect();
    }
  }

  /** The Redis key names of `key` (for operators and tests). */
  keysOf(key: string): LeaseKeys {
    return leaseKeys(this.prefix, key);
  }
}
