import type DatabaseConstructor from 'better-sqlite3';
import { requirePeer } from '../../core/runtime/peer-packages.js';

// Loaded when the store is first imported: without better-sqlite3 that import fails with an
// error naming the package and the command that installs it (decision 012).
const Database = requirePeer<typeof DatabaseConstructor>('better-sqlite3', 'leasehold/sqlite');

/**
 * The part of a better-sqlite3 prepared statement leasehold calls: structural, so that the
 * declarations do not depend on `@types/better-sqlite3` (as `PgPool` for pg). `Params` is the
 * tuple of bind arguments (`[]`, or one object of named parameters).
 */
export interface SqliteStatement<Params extends unknown[] = unknown[], Row = unknown> {
  get(...params: Params): Row | undefined;
  all(...params: Params): Row[];
  run(...params: Params): { readonly changes: number };
}

/** A function wrapped in a transaction; `immediate` takes the write lock before it runs. */
export interface SqliteTransaction<Args extends unknown[], Result> {
  (...args: Args): Result;
  immediate(...args: Args): Result;
}

/** The part of a better-sqlite3 `Database` leasehold calls. */
export interface SqliteDatabase {
  prepare<Params extends unknown[] = unknown[], Row = unknown>(
    sql: string,
  ): SqliteStatement<Params, Row>;
  transaction<Args extends unknown[], Result>(
    fn: (...args: Args) => Result,
  ): SqliteTransaction<Args, Result>;
  exec(sql: string): unknown;
  pragma(sql: string, options?: { readonly simple?: boolean }): unknown;
  defaultSafeIntegers(on?: boolean): unknown;
  close(): unknown;
}

/** How {@link openSqliteDatabase} opens a file (better-sqlite3's own options, the ones used). */
export interface SqliteOpenOptions {
  /** How long a statement waits for another connection's lock, in ms. */
  readonly timeout?: number;
  readonly readonly?: boolean;
  /** Fail instead of creating a missing file. */
  readonly fileMustExist?: boolean;
}

/**
 * Opens a better-sqlite3 connection to the file at `path`. The only place in this folder that
 * loads the driver: the `leasehold/sqlite` subpath is the one that needs it (decision 012).
 * Throws the driver's error when the file cannot be opened.
 */
export function openSqliteDatabase(path: string, options: SqliteOpenOptions): SqliteDatabase {
  // better-sqlite3's `prepare` maps a named-parameter object to a one-element tuple in a
  // conditional type, which a structural signature cannot restate; the runtime calls match.
  return new Database(path, options) as unknown as SqliteDatabase;
}

/** A connection's durability settings, as SQLite reports them. */
export interface DurabilitySettings {
  readonly journalMode: string;
  readonly synchronous: 'FULL' | 'NORMAL' | 'OFF' | 'EXTRA';
}

/** Reads {@link DurabilitySettings} back from `db`. */
export function durabilitySettings(db: SqliteDatabase): DurabilitySettings {
  const syncLevels = ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const;
  return {
    journalMode: String(db.pragma('journal_mode', { simple: true })),
    synchronous: syncLevels[Number(db.pragma('synchronous', { simple: true }))] ?? 'OFF',
  };
}
