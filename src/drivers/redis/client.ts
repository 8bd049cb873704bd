import type { RedisOptions } from 'ioredis';

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
  info(section: 'replication'): Promise<string>;
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
