import type Database from 'better-sqlite3';

/** Options for `SqlitePointerStore`. */
export interface SqlitePointerStoreOptions {
  /** The database file. Give this or `database`. */
  readonly path?: string;
  /** An open better-sqlite3 handle; the store never closes a handle it did not open. */
  readonly database?: Database.Database;
  /**
   * Prefix of the tables: `<prefix>_pointer` (which holds each published name's high-water
   * mark), `_history`, `_object`, `_fence` / `_fence_op` (a `SqliteFence`'s tables:
   * marks of names fenced before version 2, idempotency keys) and `_migrations`. Defaults to
   * `leasehold_catalog`.
   */
  readonly tablePrefix?: string;
  /** `'>='`: several publishes per lease; `'>'`: one per grant. Defaults to `'>='`. */
  readonly policy?: '>=' | '>';
  /** How long to wait for another process's write lock when opening by `path`. Defaults to 5000 ms. */
  readonly busyTimeoutMs?: number;
  /** Wall-clock milliseconds for the registry's times (retention counts on it). Defaults to `Date.now`. */
  readonly now?: () => number;
  /**
   * Create the catalog (the file when given by `path`, its tables) or bring it to this
   * version when the store opens. With `false` the store creates and changes nothing: when
   * the file or the catalog's tables are not there the constructor throws `ERR_UNAVAILABLE`
   * ("no catalog here: …"), and only reads (`pointer`, `history`, `list`) work on a catalog
   * of an older version. What commands that only read use. Defaults to `true`.
   */
  readonly autoMigrate?: boolean;
}
