import { invalidArgument } from '../../core/errors.js';
import { booleanOption, integerOption } from '../../core/runtime/options.js';

/** Options for {@link SqliteLeaseStore}. */
export interface SqliteLeaseStoreOptions {
  /** The database file. Every process that shares leases opens the same file on a local disk. */
  readonly path: string;
  /** The lease table. Defaults to `leasehold_lease`. */
  readonly table?: string;
  /**
   * How long a write waits for another process's write lock before the request fails as
   * `unavailable`. Blocks this process's event loop while it waits (better-sqlite3 is
   * synchronous). Defaults to 5000 ms.
   */
  readonly busyTimeoutMs?: number;
  /**
   * Commit the grants, releases and renewals asked for in one turn of the event loop together,
   * in one transaction, and let the grants share one fsync of the WAL that runs off the event
   * loop (libuv's thread pool), instead of one fsync each on it. Every grant is still on disk
   * before it is answered, and busy answers still write nothing; a lone request waits one loop
   * turn more. Worth it when many acquisitions run concurrently in this process (the lease
   * server turns it on). Defaults to false.
   */
  readonly groupCommit?: boolean;
}

/** The defaults of {@link SqliteLeaseStoreOptions}. */
export const SQLITE_STORE_DEFAULTS = Object.freeze({
  table: 'leasehold_lease',
  busyTimeoutMs: 5000,
  groupCommit: false,
});

/** {@link SqliteLeaseStoreOptions} checked, with the defaults filled in. */
export interface ResolvedSqliteStoreOptions {
  readonly path: string;
  readonly table: string;
  readonly busyTimeoutMs: number;
  readonly groupCommit: boolean;
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Checks `options` (`ERR_INVALID_ARGUMENT` naming the field) and fills in the defaults. */
export function resolveSqliteStoreOptions(
  options: SqliteLeaseStoreOptions,
): ResolvedSqliteStoreOptions {
  const path = options?.path as unknown;
  if (typeof path !== 'string' || path.length === 0) {
    throw invalidArgument('path', 'must be a non-empty file path', path);
  }
  if (
    path === ':memory:' ||
    /^file:.*[?&]mode=memory/.test(path) ||
    path.startsWith('file::memory:')
  ) {
    throw invalidArgument(
      'path',
      'must be a file: an in-memory SQLite database is private to one connection, so no other process could see its leases (use MemoryLeaseStore within one process)',
      path,
    );
  }
  const table = options.table ?? SQLITE_STORE_DEFAULTS.table;
  if (!TABLE_NAME.test(table))
    throw invalidArgument('table', 'must be a plain SQL identifier', table);
  const busyTimeoutMs = integerOption(
    'busyTimeoutMs',
    options.busyTimeoutMs,
    SQLITE_STORE_DEFAULTS.busyTimeoutMs,
    0,
    60_000,
  );
  const groupCommit = booleanOption(
    'groupCommit',
    options.groupCommit,
    SQLITE_STORE_DEFAULTS.groupCommit,
  );
  return { path, table, busyTimeoutMs, groupCommit };
}
