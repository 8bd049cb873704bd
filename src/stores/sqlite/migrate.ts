import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { LeaseholdError } from '../../core/errors.js';

/**
 * Whether the SQLite file at `path` exists and has the lease table — a read-only check: it
 * opens the file read-only and never creates it (opening a `SqliteLeaseStore` creates both).
 * Throws `ERR_UNAVAILABLE` when the file exists but cannot be read as a database.
 */
export function sqliteLeaseTableExists(path: string, table = 'leasehold_lease'): boolean {
  if (!existsSync(path)) return false;
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    const row = db
      .prepare("SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = ?")
      .get(table);
    return row !== undefined;
  } catch (err) {
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `cannot read ${path} as a SQLite database: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  } finally {
    db?.close();
  }
}
