import { invalidArgument, LeaseholdError } from '../core/errors.js';
import { existsSync } from 'node:fs';
import { installSpec, isPeerNotInstalled, PEER_PACKAGES } from '../core/runtime/peer-packages.js';
import type { LeaseStore } from '../core/store.js';
import { silentLogger } from '../core/events.js';
import {
  etcdClientOptions,
  parseEtcdStoreUrl,
  parsePostgresStoreUrl,
  parseRedisStoreUrl,
  parseRedisTopologyUrl,
  redactUrl,
  sqliteStorePath,
} from './store-urls.js';

export {
  etcdClientOptions,
  parseEtcdStoreUrl,
  parsePostgresStoreUrl,
  parseRedisStoreUrl,
  parseRedisTopologyUrl,
  sqliteStorePath,
  type EtcdStoreUrl,
  type RedisTopologyUrl,
} from './store-urls.js';

/** Options every store opener may use; each opener ignores what it does not need. */
export interface OpenStoreOptions {
  /** Bearer token for `http(s)://` stores (a leasehold server with auth). */
  readonly apiToken?: string;
  /**
   * Commit grants that arrive together in one transaction where the store supports it
   * (`sqlite:`; see `SqliteLeaseStoreOptions.groupCommit`). `leasehold serve` turns it on.
   * Defaults to false.
   */
  readonly groupCommit?: boolean;
  /**
   * Open only a store whose lease table already exists, creating nothing (no SQLite file, no
   * PostgreSQL schema, table or function): what commands that only read use. A missing table
   * throws `ERR_UNAVAILABLE` ("no lease table here; run `leasehold migrate` …"). Stores without
   * a table (memory, Redis, etcd, a server) open as usual. Defaults to false.
   */
  readonly readOnly?: boolean;
}

/**
 * The driver package each store needs, with the versions leasehold supports (its peer
 * dependencies): what to install when one is missing.
 */
export const DRIVER_PACKAGES = Object.freeze({
  pg: PEER_PACKAGES.pg,
  ioredis: PEER_PACKAGES.ioredis,
  etcd3: PEER_PACKAGES.etcd3,
  'better-sqlite3': PEER_PACKAGES['better-sqlite3'],
});

/**
 * Loads a store module, turning "package not installed" (the store module's own error, or
 * Node's "Cannot find package 'ioredis'") into an error that says which package (and version)
 * to install for this kind of store URL.
 */
async function loadStoreModule<T>(
  scheme: string,
  pkg: keyof typeof DRIVER_PACKAGES,
  load: () => Promise<T>,
): Promise<T> {
  try {
    return await load();
  } catch (err) {
    if (isPeerNotInstalled(err, pkg)) {
      throw new LeaseholdError(
        'ERR_UNAVAILABLE',
        `${scheme}: stores need the ${pkg} package, which is not installed: npm install ${installSpec(pkg)}`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** The error of a read-only open where the lease table does not exist. */
function noLeaseTable(where: string, store: string): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `no lease table here (${where}); run \`leasehold migrate --store ${store}\` to create it (nothing was created)`,
  );
}

/**
 * Opens a store from its URL. Receives the URL exactly as given (`sqlite:./x.db` is not a
 * valid WHATWG URL with a path, so openers parse their own form).
 */
export type StoreOpener = (url: string, options: OpenStoreOptions) => Promise<LeaseStore>;

/**
 * The store URL schemes leasehold knows, by scheme (without the colon). Each opener loads its
 * store lazily, so a user of one backend never loads another's driver.
 *
 * Extension point: a new backend adds one entry here (or calls {@link registerStoreScheme}).
 */
async function openPostgres(url: string, options: OpenStoreOptions): Promise<LeaseStore> {
  const { connectionString, schema, table } = parsePostgresStoreUrl(url);
  const { PostgresLeaseStore, postgresLeaseTableExists } = await loadStoreModule(
    'postgres',
    'pg',
    () => import('./postgres/index.js'),
  );
  const place = {
    ...(schema === undefined ? {} : { schema }),
    ...(table === undefined ? {} : { table }),
  };
  if (options.readOnly === true) {
    if (!(await postgresLeaseTableExists({ connectionString, ...place, maxConnections: 1 }))) {
      throw noLeaseTable(
        `no table ${schema ?? 'public'}.${table ?? 'coordination_lease'}`,
        `'${redactUrl(url)}'`,
      );
    }
    return new PostgresLeaseStore({ connectionString, ...place, autoMigrate: false });
  }
  return new PostgresLeaseStore({ connectionString, ...place });
}

async function openEtcd(url: string): Promise<LeaseStore> {
  const parsed = parseEtcdStoreUrl(url);
  const clientOptions = etcdClientOptions(parsed);
  const { EtcdLeaseStore } = await loadStoreModule(
    'etcd',
    'etcd3',
    () => import('./etcd/index.js'),
  );
  return new EtcdLeaseStore({
    hosts: parsed.hosts,
    ...(parsed.namespace === undefined ? {} : { namespace: parsed.namespace }),
    clientOptions,
  });
}

/**
 * Opens `redis://[:PW@]HOST:PORT[/DB][?prefix=P]` (`rediss://` for TLS). The store opens and
 * owns its ioredis client; `prefix` (default `leasehold:`) is stripped before ioredis sees the URL.
 */
async function openRedis(url: string): Promise<LeaseStore> {
  const { redis, prefix } = parseRedisStoreUrl(url);
  const { RedisLeaseStore } = await loadStoreModule(
    'redis',
    'ioredis',
    () => import('./redis/index.js'),
  );
  return new RedisLeaseStore({ redis, ...(prefix === undefined ? {} : { prefix }) });
}

/** Opens a Redis Cluster or Sentinel store whose client the store closes with itself. */
async function openRedisTopologyStore(url: string): Promise<LeaseStore> {
  const { topology, prefix } = parseRedisTopologyUrl(url);
  const [{ RedisLeaseStore }, { openRedisTopology }] = await loadStoreModule(
    'redis',
    'ioredis',
    () => Promise.all([import('./redis/index.js'), import('./redis/client.js')]),
  );
  return new RedisLeaseStore({
    redis: openRedisTopology(topology, silentLogger),
    closeClient: true,
    ...(prefix === undefined ? {} : { prefix }),
  });
}

const OPENERS = new Map<string, StoreOpener>([
  [
    'sqlite',
    async (url, options) => {
      const path = sqliteStorePath(url);
      const { SqliteLeaseStore, sqliteLeaseTableExists } = await loadStoreModule(
        'sqlite',
        'better-sqlite3',
        () => import('./sqlite/index.js'),
      );
      if (options.readOnly === true && !sqliteLeaseTableExists(path)) {
        throw noLeaseTable(existsSync(path) ? `${path} has none` : `${path} does not exist`, url);
      }
      return new SqliteLeaseStore({ path, groupCommit: options.groupCommit === true });
    },
  ],
  [
    'memory',
    async () => {
      const { MemoryLeaseStore } = await import('./memory/index.js');
      return new MemoryLeaseStore();
    },
  ],
  ['postgres', openPostgres],
  ['postgresql', openPostgres],
  ['etcd', openEtcd],
  ['etcds', openEtcd],
  ['redis', openRedis],
  ['rediss', openRedis],
  ['redis+cluster', openRedisTopologyStore],
  ['redis+sentinel', openRedisTopologyStore],
  [
    'http',
    async (url, options) => {
      const { HttpLeaseStore } = await import('./http/index.js');
      return HttpLeaseStore.connect({ url, apiToken: options.apiToken });
    },
  ],
  [
    'https',
    async (url, options) => {
      const { HttpLeaseStore } = await import('./http/index.js');
      return HttpLeaseStore.connect({ url, apiToken: options.apiToken });
    },
  ],
]);

/** Registers (or replaces) the opener for a URL scheme such as `postgres`. */
export function registerStoreScheme(scheme: string, opener: StoreOpener): void {
  if (!/^[a-z][a-z0-9+.-]*$/.test(scheme)) {
    throw invalidArgument('scheme', 'must be a lowercase URL scheme without the colon', scheme);
  }
  OPENERS.set(scheme, opener);
}

/** The URL schemes {@link openStore} understands, for help texts. */
export function storeSchemes(): string[] {
  return [...OPENERS.keys()];
}

/**
 * Opens a {@link LeaseStore} from a URL: `sqlite:PATH`, `memory:`,
 * `postgres://USER@HOST:PORT/DB[?schema=S&table=T]` (also `postgresql://`),
 * `etcd://HOST:PORT[,HOST:PORT…][?namespace=P]` (`etcds://USER:PW@…?ca=FILE&cert=FILE&key=FILE`
 * for TLS and an etcd user), `redis://HOST:PORT[/DB][?prefix=P]`,
 * `http://HOST:PORT` (a leasehold server), and the schemes registered with {@link registerStoreScheme}. A bare path
 * ending in `.db` is taken as `sqlite:PATH`. Throws `ERR_INVALID_ARGUMENT` for an unknown
 * scheme and `ERR_UNAVAILABLE` when the store cannot be opened.
 *
 * @example
 * const store = await openStore('sqlite:./leasehold.db');
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<LeaseStore> {
  if (typeof url !== 'string' || url.length === 0) {
    throw invalidArgument('store', 'must be a store URL such as sqlite:./leasehold.db', url);
  }
  if (/\.db$/.test(url) && !url.includes(':')) return openStore(`sqlite:${url}`, options);
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(url)?.[1];
  const opener = scheme === undefined ? undefined : OPENERS.get(scheme);
  if (opener === undefined) {
    throw invalidArgument(
      'store',
      `must start with one of ${[...OPENERS.keys()].map((s) => `${s}:`).join(', ')}`,
      url,
    );
  }
  return opener(url, options);
}
