import { readFileSync } from 'node:fs';
import type { IOptions } from 'etcd3';
import { invalidArgument } from '../core/errors.js';
import type { RedisTopology } from './redis/client.js';

// What each store URL says, parsed without loading any driver: `openStore`, the CLI's
// commands and its start-up checks all read URLs through these.

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
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@/]*@/, '$1***@');
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

/** What a `redis+cluster://` or `redis+sentinel://` URL says: the topology and the key prefix. */
export interface RedisTopologyUrl {
  readonly topology: RedisTopology;
  readonly prefix?: string;
}

const REDIS_TOPOLOGY_PARAMS = new Set(['prefix', 'sentinelPassword']);

/**
 * Parses `redis+cluster://[USER:PW@]host:port[,host:port…][?prefix=P]` (seed nodes of a
 * Cluster) and `redis+sentinel://[USER:PW@]host:port[,…]/MASTER[?prefix=P&sentinelPassword=S]`
 * (the sentinels and the master's name). User and password are the data nodes' and are
 * percent-decoded. No TLS form yet: use the library with your own ioredis client for that.
 */
export function parseRedisTopologyUrl(url: string): RedisTopologyUrl {
  const m =
    /^redis\+(cluster|sentinel):\/\/(?:([^@/?#]*)@)?([^@/?#]+)(?:\/([^?#]*))?(?:\?([^#]*))?$/.exec(
      url,
    );
  if (m === null) {
    throw invalidArgument(
      'store',
      'must look like redis+cluster://host:port[,host:port…] or redis+sentinel://host:port[,…]/MASTER',
      redactUrl(url),
    );
  }
  const kind = m[1] as 'cluster' | 'sentinel';
  const nodes = m[3]!.split(',').map((h) => {
    const hp = /^([A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(h);
    const port = hp === null ? NaN : Number(hp[2]);
    if (hp === null || port < 1 || port > 65535)
      throw invalidArgument(
        'store',
        `Redis node ${JSON.stringify(h)} is not host:port`,
        redactUrl(url),
      );
    return { host: hp[1]!.replace(/^\[|\]$/g, ''), port };
  });
  const name = m[4] === undefined || m[4] === '' ? undefined : decodeURIComponent(m[4]);
  if (kind === 'sentinel' && name === undefined)
    throw invalidArgument(
      'store',
      'a redis+sentinel:// URL names the master after the sentinels: /MASTER',
      redactUrl(url),
    );
  if (kind === 'cluster' && name !== undefined)
    throw invalidArgument(
      'store',
      'a redis+cluster:// URL has no path (a Cluster has no database number)',
      redactUrl(url),
    );
  const params = new URLSearchParams(m[5] ?? '');
  for (const p of params.keys()) {
    if (!REDIS_TOPOLOGY_PARAMS.has(p))
      throw invalidArgument(
        'store',
        `Redis URL parameter ${JSON.stringify(p)} is not one of ${[...REDIS_TOPOLOGY_PARAMS].join(', ')}`,
        redactUrl(url),
      );
  }
  const sentinelPassword = params.get('sentinelPassword');
  if (kind === 'cluster' && sentinelPassword !== null)
    throw invalidArgument(
      'store',
      'sentinelPassword needs a redis+sentinel:// URL',
      redactUrl(url),
    );
  let username: string | undefined;
  let password: string | undefined;
  if (m[2] !== undefined) {
    const colon = m[2].indexOf(':');
    const user = decodeURIComponent(colon < 0 ? m[2] : m[2].slice(0, colon));
    username = user === '' ? undefined : user;
    password = colon < 0 ? undefined : decodeURIComponent(m[2].slice(colon + 1));
  }
  const prefix = params.get('prefix');
  return {
    topology: {
      kind,
      nodes,
      ...(name === undefined ? {} : { name }),
      ...(username === undefined ? {} : { username }),
      ...(password === undefined ? {} : { password }),
      ...(sentinelPassword === null ? {} : { sentinelPassword }),
    },
    ...(prefix === null ? {} : { prefix }),
  };
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
