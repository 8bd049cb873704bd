import { existsSync, readFileSync } from 'node:fs';
import { LeaseholdError } from '../../core/errors.js';
import { openSqliteDatabase, type SqliteDatabase } from './client.js';
import { epochNames } from './epoch.js';
import { applySqliteMigrations } from '../../drivers/sqlite/migrate.js';
import { retryWhileBusy, useDurableWal } from '../../drivers/sqlite/open-file.js';
import * as Q from './queries.js';

/** The lease table's migrations, applied in this order (files in `./migrations/`). */
const MIGRATIONS = [
  '0001_lease.sql',
  '0002_token_block.sql',
  '0003_epoch.sql',
  '0004_lock_delay.sql',
] as const;

/**
 * Whether the SQLite file at `path` exists and has the lease table — a read-only check: it
 * opens the file read-only and never creates it (opening a `SqliteLeaseStore` creates both).
 * Throws `ERR_UNAVAILABLE` when the file exists but cannot be read as a database.
 */
export function sqliteLeaseTableExists(path: string, table = 'leasehold_lease'): boolean {
  if (!existsSync(path)) return false;
  let db: SqliteDatabase | undefined;
  try {
    db = openSqliteDatabase(path, { readonly: true, fileMustExist: true });
    const row = db
      .prepare<[string]>("SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = ?")
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

/** Switches to WAL with FULL sync and migrates, retried while another process opens the file. */
export function openLeaseTable(db: SqliteDatabase, table: string, busyTimeoutMs: number): void {
  retryWhileBusy(busyTimeoutMs, () => {
    // FULL: the WAL is fsync'd at every commit, so a returned token survives power loss.
    useDurableWal(db);
    db.defaultSafeIntegers(true);
    migrate(db, table);
  });
}

/** Applies the numbered migrations not yet applied to `table` (drivers/sqlite/migrate.ts). */
function migrate(db: SqliteDatabase, table: string): void {
  const record = {
    create: Q.CREATE_MIGRATIONS_TABLE,
    seen: 'SELECT 1 FROM leasehold_migrations WHERE name = ?',
    add: 'INSERT INTO leasehold_migrations (name, applied_wall_ms) VALUES (?, ?)',
    appliedAt: () => BigInt(Date.now()),
  };
  const migrations = MIGRATIONS.map((file) => ({
    name: `${table}/${file}`,
    sql: (): string => {
      const text = readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8');
      let sql = text
        .replaceAll('{{table}}', `"${table}"`)
        .replaceAll('{{block_guard}}', `"${table}_block_guard"`);
      for (const [name, quoted] of Object.entries(epochNames(table))) {
        sql = sql.replaceAll(name, quoted);
      }
      return sql;
    },
  }));
  applySqliteMigrations(db, record, migrations);
}
