import { invalidArgument, LeaseholdError } from '../core/errors.js';
import { existsSync, readFileSync } from 'node:fs';
import { installSpec, isPeerNotInstalled, PEER_PACKAGES } from '../core/runtime/peer-packages.js';
import type { LeaseStore } from '../core/store.js';
import type { IOptions } from 'etcd3';

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
/** Query parameters of a `postgres://` URL that leasehold reads and strips before pg sees it. */
const POSTGRES_PARAMS = ['schema', 'table'] as const;

/**
 * Splits a `postgres://` URL into the connection string pg receives and the lease table's
 * place (`?schema=…&table=…`, both optional).
 */
export function parsePostgresStoreUrl(url: string): {
  connectionString: string;
  schema?: string;
  table?: string;
} {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidArgument('store', 'is not a valid postgres:// URL', redactUrl(url));
  }
  const out: { connectionString: string; schema?: string; table?: string } = {
    connectionString: '',
  };
  for (const name of POSTGRES_PARAMS) {
    const v = parsed.searchParams.get(name);
    if (v !== null) {
      if (v === '') throw invalidArgument('store', `?${name}= must not be empty`, redactUrl(url));
      out[name] = v;
    }
    parsed.searchParams.delete(name);
  }
  out.connectionString = parsed.toString();
  return out;
}

/**
 * The file path of a `sqlite:PATH` store URL (`sqlite:///abs/path` too), or of a bare path
 * ending in `.db`.
 */
export function sqliteStorePath(url: string): string {
  if (/\.db$/.test(url) && !url.includes(':')) return url;
  const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
  if (!url.startsWith('sqlite:') || path === '') {
    throw invalidArgument('store', 'sqlite: needs a file path', url);
  }
  return path;
}

/** A URL with its password replaced, for error messages. */
function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@/]*@/, '$1***@');
}

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

/** What an `etcd://` or `etcds://` URL says: endpoints, namespace, TLS files and a user. */
export interface EtcdStoreUrl {
  readonly hosts: string[];
  readonly namespace?: string;
  /** PEM file paths (`etcds://` only): the CA to trust, and a client certificate and key. */
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  /** etcd user (RBAC), from the URL's user info. */
  readonly auth?: { readonly username: string; readonly password: string };
}

const ETCD_URL_PARAMS = new Set(['namespace', 'ca', 'cert', 'key']);

/**
 * Parses `etcd[s]://[USER:PASSWORD@]host:port[,host:port…][?namespace=P&ca=FILE&cert=FILE&key=FILE]`
 * into etcd3 endpoints (`http://` or, for `etcds://`, `https://host:port`), a key namespace,
 * TLS file paths and an etcd user. User and password are percent-decoded.
 */
export function parseEtcdStoreUrl(url: string): EtcdStoreUrl {
  const m = /^(etcds?):\/\/(?:([^@/?#]*)@)?([^@/?#]+)\/?(?:\?([^#]*))?$/.exec(url);
  if (m === null) {
    throw invalidArgument(
      'store',
      'must look like etcd://host:port[,host:port…] or etcds://user:password@host:port[,…]?ca=FILE',
      redactUrl(url),
    );
  }
  const secure = m[1] === 'etcds';
  const hosts = m[3]!.split(',').map((h) => {
    if (!/^[A-Za-z0-9.\-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(h)) {
      throw invalidArgument(
        'store',
        `etcd endpoint ${JSON.stringify(h)} is not host:port`,
        redactUrl(url),
      );
    }
    return `${secure ? 'https' : 'http'}://${h}`;
  });
  const params = new URLSearchParams(m[4] ?? '');
  for (const name of params.keys()) {
    if (!ETCD_URL_PARAMS.has(name)) {
      throw invalidArgument(
        'store',
        `etcd URL parameter ${JSON.stringify(name)} is not one of ${[...ETCD_URL_PARAMS].join(', ')}`,
        redactUrl(url),
      );
    }
  }
  const namespace = params.get('namespace');
  const ca = params.get('ca');
  const cert = params.get('cert');
  const key = params.get('key');
  if (!secure && (ca !== null || cert !== null || key !== null)) {
    throw invalidArgument('store', 'ca, cert and key need an etcds:// URL', redactUrl(url));
  }
  if ((cert === null) !== (key === null)) {
    throw invalidArgument('store', 'cert and key must be given together', redactUrl(url));
  }
  let auth: EtcdStoreUrl['auth'];
  if (m[2] !== undefined) {
    const colon = m[2].indexOf(':');
    const username = decodeURIComponent(colon < 0 ? m[2] : m[2].slice(0, colon));
    const password = colon < 0 ? '' : decodeURIComponent(m[2].slice(colon + 1));
    if (username === '')
      throw invalidArgument('store', 'the etcd user name is empty', redactUrl(url));
    auth = { username, password };
  }
  const tls =
    ca === null && cert === null
      ? undefined
      : { ...(ca === null ? {} : { ca }), ...(cert === null ? {} : { cert, key: key! }) };
  return {
    hosts,
    ...(namespace === null ? {} : { namespace }),
    ...(tls === undefined ? {} : { tls }),
    ...(auth === undefined ? {} : { auth }),
  };
}

/**
 * The etcd3 client options an `etcd[s]://` URL asks for: TLS from its PEM files (read now, so
 * an unreadable file is named before any connection) and its user. The store and
 * `leasehold epoch` both connect with these.
 */
export function etcdClientOptions(parsed: EtcdStoreUrl): Omit<IOptions, 'hosts'> {
  const { tls, auth } = parsed;
  const read = (field: string, path: string | undefined): Buffer | undefined => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (err) {
      throw invalidArgument(field, `must be a readable PEM file (${String(err)})`, path);
    }
  };
  const ca = read('ca', tls?.ca);
  const cert = read('cert', tls?.cert);
  const key = read('key', tls?.key);
  return {
    ...(ca === undefined && cert === undefined
      ? {}
      : {
          credentials: {
            // Without ca, the system's trusted CAs verify the server.
            ...(ca === undefined ? {} : { rootCertificate: ca }),
            ...(cert === undefined ? {} : { certChain: cert, privateKey: key! }),
          } as { rootCertificate: Buffer },
        }),
    ...(auth === undefined ? {} : { auth }),
  };
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

/** Splits `redis://…[?prefix=P]` into the URL ioredis sees and the key prefix. */
export function parseRedisStoreUrl(url: string): { redis: string; prefix?: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidArgument('store', 'is not a valid redis:// URL', redactUrl(url));
  }
  const prefix = parsed.searchParams.get('prefix');
  parsed.searchParams.delete('prefix');
  return prefix === null ? { redis: parsed.toString() } : { redis: parsed.toString(), prefix };
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
