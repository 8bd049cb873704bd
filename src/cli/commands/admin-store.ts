import { parsePostgresStoreUrl } from '../../stores/open-store.js';
import { DEFAULT_STORE, UsageError } from '../common.js';

/** The schemes whose schema `migrate` manages as a PostgreSQL table. */
const POSTGRES_SCHEMES = ['postgres', 'postgresql'];

/** Where an administrative command (`migrate`, `epoch`) acts: a PostgreSQL lease table. */
export interface AdminTarget {
  readonly connectionString: string;
  readonly schema?: string;
  readonly table?: string;
}

/** The scheme of a store URL; a bare path ending in `.db` is a SQLite file. */
export function storeScheme(url: string): string {
  if (/\.db$/.test(url) && !url.includes(':')) return 'sqlite';
  return /^([a-z][a-z0-9+.-]*):/.exec(url)?.[1] ?? 'sqlite';
}

/**
 * Resolves `--store` (or `LEASEHOLD_STORE`) to a PostgreSQL lease table for `migrate` /
 * `epoch`. Any other scheme is a usage error naming what is supported.
 */
export function adminTarget(command: string, store: string | undefined): AdminTarget {
  const url = store ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
  const scheme = storeScheme(url);
  if (!POSTGRES_SCHEMES.includes(scheme)) {
    throw new UsageError(
      command === 'migrate'
        ? `migrate supports postgres://, postgresql:// and sqlite: stores only, not ${scheme} (memory, Redis, etcd and servers need no migration)`
        : `epoch supports sqlite:, postgres://, postgresql://, redis://, rediss://, redis+cluster://, redis+sentinel://, etcd:// and etcds:// stores, not ${scheme} (a memory store forgets its tokens anyway; a server's store is raised where it runs)`,
    );
  }
  return parsePostgresStoreUrl(url);
}
