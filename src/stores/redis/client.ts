import type * as IORedis from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { requirePeer } from '../../core/runtime/peer-packages.js';
import type { Logger } from '../../core/events.js';
import type { RedisClient, RedisNodeClient } from '../../drivers/redis/client.js';
import { abortedError, unreachableError } from './errors.js';

// Loaded when the store is first imported: without ioredis that import fails with an error
// naming the package and the command that installs it (decision 012).
const { Redis, Cluster: IORedisCluster } = requirePeer<typeof IORedis>(
  'ioredis',
  'leasehold/redis',
);

/**
 * Opens the store's own client for a `redis://` URL. The only places in this folder that load
 * the driver are this module's openers: the `leasehold/redis` subpath is the one that needs it
 * (decision 012).
 */
export function openRedisClient(url: string, options: RedisOptions, logger: Logger): RedisClient {
  const redis = new Redis(url, options);
  // Without a listener ioredis prints every reconnect failure; operations still reject.
  redis.on('error', (err: unknown) => {
    logger.debug({ err: String(err) }, 'redis connection error');
  });
  return redis;
}

/** A client for one command-line run (`leasehold epoch`): one try per command, connected later. */
export function openOneShotClient(url: string): RedisNodeClient {
  return new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 5000, lazyConnect: true });
}

/** A connection to one node with the given settings (a Cluster's release subscription). */
export function openNodeClient(options: RedisOptions): RedisNodeClient {
  return new Redis(options);
}

/**
 * Waits, before sending anything, for a client that is still connecting or reconnecting:
 * until it is ready, or until its next connection error, which is thrown with its cause
 * (`connect ECONNREFUSED 127.0.0.1:6390`) instead of the command waiting in ioredis' offline
 * queue until the request times out with no reason given. Nothing was sent, so nothing can
 * happen later at Redis. Bounded by `signal`.
 */
export function whenConnected(redis: RedisClient, signal: AbortSignal | undefined): Promise<void> {
  if (!['connecting', 'connect', 'reconnecting'].includes(redis.status)) return Promise.resolve();
  return new Promise((resolve, reject) => {
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
      reject(unreachableError(err));
    };
    const onAbort = (): void => {
      done();
      reject(abortedError(signal));
    };
    redis.on('ready', onReady);
    redis.on('error', onError);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** What a `redis+cluster://` or `redis+sentinel://` URL says (see `parseRedisTopologyUrl`). */
export interface RedisTopology {
  readonly kind: 'cluster' | 'sentinel';
  /** Cluster seed nodes, or the sentinels. */
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  /** The master's name the sentinels know (Sentinel only). */
  readonly name?: string;
  /** The data nodes' user and password (ACL), from the URL's user info. */
  readonly username?: string;
  readonly password?: string;
  /** The sentinels' own password, when they have one (`?sentinelPassword=`). */
  readonly sentinelPassword?: string;
}

/**
 * Opens a Cluster or Sentinel client from a parsed URL, for a store that closes it
 * (`closeClient: true`) or for one command-line run.
 */
export function openRedisTopology(topology: RedisTopology, logger: Logger): RedisClient {
  const auth = {
    ...(topology.username === undefined ? {} : { username: topology.username }),
    ...(topology.password === undefined ? {} : { password: topology.password }),
  };
  const nodes = topology.nodes.map((n) => ({ host: n.host, port: n.port }));
  const redis: RedisClient =
    topology.kind === 'cluster'
      ? new IORedisCluster(nodes, { redisOptions: auth })
      : new Redis({
          sentinels: nodes,
          name: topology.name!,
          ...auth,
          ...(topology.sentinelPassword === undefined
            ? {}
            : { sentinelPassword: topology.sentinelPassword }),
        });
  redis.on('error', (err: unknown) => {
    logger.debug({ err: String(err) }, 'redis connection error');
  });
  return redis;
}
