import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../../core/events.js';
import { abortedError, unreachableError } from './errors.js';

/**
 * A listener of a client's events (`ready`, `error`, `message` …). `any`, as in Node's own
 * EventEmitter: each event passes its own arguments, which one signature cannot name.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Listener = (...args: any[]) => void;

/**
 * The commands leasehold sends, on one node's client and on a Cluster client alike:
 * structural, so that any client with ioredis' shape fits (as `PgPool` for pg).
 */
export interface RedisCommands {
  /** ioredis' connection state: `ready` once connected (`connecting`, `reconnecting` …). */
  readonly status: string;
  evalsha(sha: string, numKeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
  get(key: string): Promise<string | null>;
  hget(key: string, field: string): Promise<string | null>;
  hmget(key: string, ...fields: string[]): Promise<Array<string | null>>;
  hset(key: string, ...fieldsAndValues: string[]): Promise<number>;
  time(): Promise<unknown>;
  wait(replicas: number, timeoutMs: number): Promise<number>;
  config(subcommand: 'GET', parameter: string): Promise<unknown>;
  scan(
    cursor: string,
    match: 'MATCH',
    pattern: string,
    count: 'COUNT',
    n: number,
  ): Promise<[cursor: string, names: string[]]>;
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: string, listener: Listener): unknown;
  once(event: string, listener: Listener): unknown;
  off(event: string, listener: Listener): unknown;
}

/** The part of an ioredis `Redis` (standalone or Sentinel: one node at a time) leasehold uses. */
export interface RedisNodeClient extends RedisCommands {
  readonly options: { readonly host?: string | undefined; readonly port?: number | undefined };
  /** A new connection with the same settings (the store's pub/sub connection). */
  duplicate(): RedisNodeClient;
  connect(): Promise<unknown>;
}

/** The part of an ioredis `Cluster` leasehold uses. */
export interface RedisClusterClient extends RedisCommands {
  readonly options: {
    readonly redisOptions?: Pick<RedisOptions, 'username' | 'password' | 'tls'> | undefined;
  };
  /** The clients of the Cluster's nodes the client knows now. */
  nodes(role: 'all' | 'master'): RedisNodeClient[];
}

/** The ioredis clients leasehold accepts: a single node (standalone, Sentinel) or a Cluster. */
export type RedisClient = RedisNodeClient | RedisClusterClient;

/** Whether `redis` is a Cluster client (and not one node). */
export function isCluster(redis: RedisClient): redis is RedisClusterClient {
  return 'nodes' in redis && typeof redis.nodes === 'function';
}

/** The clients to ask for something every master holds (`SCAN`): each master of a Cluster. */
export function mastersOf(redis: RedisClient): RedisNodeClient[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

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
