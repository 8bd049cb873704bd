import { invalidArgument } from '../../core/errors.js';
import type { ObjectStore } from './object-store.js';
import { DirectoryObjectStore } from './objects/directory.js';
import { S3ObjectStore } from './objects/s3.js';
import type { PointerStore } from './pointer-store.js';
import { PostgresPointerStore } from './pointers/postgres/index.js';
import { SqlitePointerStore } from './pointers/sqlite/store.js';

/** Query parameters of a `postgres://` pointer URL that the catalog reads and strips. */
const POSTGRES_PARAMS = ['schema', 'prefix'] as const;

/** How {@link openPointerStore} opens the store. */
export interface OpenPointerStoreOptions {
  /**
   * Create the catalog or bring it to this version on first use. `false` creates and changes
   * nothing (no file, schema, table or function) and fails with `ERR_UNAVAILABLE` ("no
   * catalog here: …") where there is no catalog: for reading only. Defaults to `true`.
   */
  readonly autoMigrate?: boolean;
}

/**
 * Opens a pointer store from a URL: `sqlite:PATH[?prefix=P]` or
 * `postgres://USER@HOST:PORT/DB[?schema=S&prefix=P]` (other query parameters go to the driver).
 * `prefix` is the table prefix (default `leasehold_catalog`). pg is loaded on first use.
 */
export function openPointerStore(url: string, options: OpenPointerStoreOptions = {}): PointerStore {
  if (typeof url !== 'string' || url === '')
    throw invalidArgument('pointers', 'must be a URL', url);
  const migrate = options.autoMigrate === undefined ? {} : { autoMigrate: options.autoMigrate };
  if (url.startsWith('sqlite:')) {
    const rest = url.slice('sqlite:'.length);
    const q = rest.indexOf('?');
    const path = q < 0 ? rest : rest.slice(0, q);
    const prefix = q < 0 ? null : new URLSearchParams(rest.slice(q + 1)).get('prefix');
    return new SqlitePointerStore({
      path,
      ...(prefix === null ? {} : { tablePrefix: prefix }),
      ...migrate,
    });
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw invalidArgument(
        'pointers',
        'is not a valid postgres:// URL',
        url.replace(/\/\/[^@/]*@/, '//…@'),
      );
    }
    const found: Partial<Record<(typeof POSTGRES_PARAMS)[number], string>> = {};
    for (const p of POSTGRES_PARAMS) {
      const v = parsed.searchParams.get(p);
      if (v !== null) found[p] = v;
      parsed.searchParams.delete(p);
    }
    return new PostgresPointerStore({
      connectionString: parsed.toString(),
      ...(found.schema === undefined ? {} : { schema: found.schema }),
      ...(found.prefix === undefined ? {} : { tablePrefix: found.prefix }),
      ...migrate,
    });
  }
  throw invalidArgument('pointers', 'must start with sqlite: or postgres://', url);
}

/**
 * Opens an object store from a URL: `dir:PATH` (a local directory) or `s3://BUCKET[/PREFIX/]`
 * (the SDK's usual settings from the environment; `endpoint` for an S3-compatible server,
 * which then uses path-style addressing).
 */
export function openObjectStore(url: string, s3: { endpoint?: string } = {}): ObjectStore {
  if (typeof url !== 'string' || url === '') throw invalidArgument('objects', 'must be a URL', url);
  if (url.startsWith('dir:')) return new DirectoryObjectStore({ root: url.slice('dir:'.length) });
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(url);
  if (m !== null) {
    const prefix = m[2] ?? '';
    return new S3ObjectStore({
      bucket: m[1]!,
      prefix: prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`,
      clientConfig:
        s3.endpoint === undefined ? {} : { endpoint: s3.endpoint, forcePathStyle: true },
    });
  }
  throw invalidArgument('objects', 'must start with dir: or s3://', url);
}
