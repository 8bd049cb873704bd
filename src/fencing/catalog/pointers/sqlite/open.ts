import Database from 'better-sqlite3';
import { existsSync, readFileSync } from 'node:fs';
import { invalidArgument, isLeaseholdError, LeaseholdError } from '../../../../core/errors.js';
import { applySqliteMigrations } from '../../../../drivers/sqlite/migrate.js';
import { retryWhileBusy, useDurableWal } from '../../../../drivers/sqlite/open-file.js';
import * as Q from './queries.js';

/** The pointer store's migrations, in order. Released files are never edited: add a new one. */
export const SQLITE_CATALOG_MIGRATIONS = [
  '0001_catalog.sql',
  '0002_mark_in_pointer.sql',
  '0003_publish_fast_path.sql',
  '0004_publish_without_registry.sql',
  '0005_claim_marks.sql',
] as const;

const PREFIX = /^[A-Za-z_][A-Za-z0-9_]{0,40}$/;

/**
 * The catalog's table names under `prefix` (checked: a plain SQL identifier), and `fill`,
 * which puts them in the `{{name}}` places of a statement or migration.
 */
export function catalogNames(prefix: unknown): {
  readonly names: Readonly<Record<string, string>>;
  readonly fill: (text: string) => string;
} {
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    throw invalidArgument(
      'tablePrefix',
      'must be a plain SQL identifier of at most 41 characters',
      prefix,
    );
  }
  const names: Record<string, string> = {
    pointer: `"${prefix}_pointer"`,
    history: `"${prefix}_history"`,
    object: `"${prefix}_object"`,
    object_gc_index: `"${prefix}_object_gc"`,
    migrations: `"${prefix}_migrations"`,
    pointer_v2: `"${prefix}_pointer_v2"`,
    history_v2: `"${prefix}_history_v2"`,
    fence: `"${prefix}_fence"`,
    fence_op: `"${prefix}_fence_op"`,
    fence_closed_insert: `"${prefix}_fence_closed_insert"`,
    fence_closed_update: `"${prefix}_fence_closed_update"`,
    gc_mark: `"${prefix}_gc_mark"`,
    gc_session: `"${prefix}_gc_session"`,
    tombstone_guard: `"${prefix}_tombstone_guard"`,
    claim_mark: `"${prefix}_claim_mark"`,
  };
  const fill = (text: string): string =>
    text.replace(/\{\{(\w+)\}\}/g, (m, k: string) => names[k] ?? m);
  return { names, fill };
}

/**
 * Opens the catalog's file with `synchronous = FULL`, so a publish is on disk before it is
 * acknowledged, in WAL mode. Without `autoMigrate` it creates and changes nothing: the file
 * and the catalog's pointer table must be there, and the journal mode stays as the file has
 * it (a catalog made by leasehold is in WAL mode from its first open).
 */
export function openCatalogFile(
  path: string,
  busyTimeoutMs: number,
  autoMigrate: boolean,
  prefix: string,
): Database.Database {
  if (!autoMigrate && !existsSync(path)) throw noCatalog(`${path} does not exist`);
  let db: Database.Database;
  try {
    db = new Database(path, { timeout: busyTimeoutMs, fileMustExist: !autoMigrate });
  } catch (err) {
    throw cannotOpen(path, err);
  }
  try {
    if (!autoMigrate) requireCatalog(db, prefix, path);
    retryWhileBusy(busyTimeoutMs, () => {
      if (autoMigrate) useDurableWal(db);
      else db.pragma('synchronous = FULL');
    });
    return db;
  } catch (err) {
    db.close();
    throw isLeaseholdError(err) ? err : cannotOpen(path, err);
  }
}

/** Throws unless the catalog's pointer table (there in every version) is in `db`. */
export function requireCatalog(db: Database.Database, prefix: string, where: string): void {
  let present: unknown;
  try {
    present = db.prepare(Q.CATALOG_PRESENT).get({ table: `${prefix}_pointer` });
  } catch (err) {
    throw cannotOpen(where, err);
  }
  if (present === undefined) throw noCatalog(`${where} has no table ${prefix}_pointer`);
}

/** Applies the catalog's migrations not yet recorded (drivers/sqlite/migrate.ts). */
export function migrateCatalog(
  db: Database.Database,
  names: Readonly<Record<string, string>>,
  fill: (sql: string) => string,
): void {
  const record = names['migrations']!;
  applySqliteMigrations(
    db,
    {
      create: fill(Q.CREATE_MIGRATIONS),
      seen: `SELECT 1 FROM ${record} WHERE name = ?`,
      add: `INSERT INTO ${record} (name, applied_ms) VALUES (?, ?)`,
      appliedAt: Date.now,
    },
    SQLITE_CATALOG_MIGRATIONS.map((file) => ({
      name: file,
      sql: () => fill(readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8')),
    })),
  );
}

function cannotOpen(path: string, err: unknown): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `cannot open catalog database ${path}: ${String(err)}`,
    { cause: err },
  );
}

/** A catalog opened without migrating that is not there. */
function noCatalog(what: string): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `no catalog here: ${what} (nothing was created; a catalog is created by the first stage or publish of a program that uses it)`,
  );
}
