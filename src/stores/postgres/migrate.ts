import { readFileSync } from 'node:fs';
import {
  channelName,
  checkout,
  checkIdentifier,
  lastResult,
  quoteIdent,
  quoteLiteral,
  resolveConnection,
  timeoutPrefix,
  type PgPool,
  type PostgresConnectionOptions,
} from './client.js';
import { sqlState, unavailable } from './errors.js';

/** One forward-only migration: a name recorded once applied, and its SQL. */
export interface Migration {
  readonly name: string;
  readonly sql: string;
}

/** The lease store's migrations, in order. Files are never edited once released: add a new one. */
export const LEASE_MIGRATION_FILES = [
  '0001_lease.sql',
  '0002_acquire_function.sql',
  '0003_token_block.sql',
  '0004_waiter_interest.sql',
  '0005_grant_release_functions.sql',
  '0006_notify_other_listeners.sql',
  '0007_grant_update_first.sql',
] as const;

/** Loads the lease store's migrations with names substituted for one schema and table. */
export function leaseMigrations(schema: string, table: string): Migration[] {
  const names: Record<string, string> = {
    schema: quoteIdent(schema),
    table: quoteIdent(table),
    lease: `${quoteIdent(schema)}.${quoteIdent(table)}`,
    notify_fn: `${quoteIdent(schema)}.${quoteIdent(`${table}_notify`)}`,
    notify_trigger: quoteIdent(`${table}_notify`),
    acquire_fn: acquireFunctionName(schema, table),
    block_fn: `${quoteIdent(schema)}.${quoteIdent(`${table}_token_block`)}`,
    block_trigger: quoteIdent(`${table}_token_block`),
    channel: quoteLiteral(channelName(schema, table)),
    interest: interestTableName(schema, table),
    grant_notice_fn: grantNoticeFunctionName(schema, table),
    grant_fn: grantFunctionName(schema, table),
    release_fn: releaseFunctionName(schema, table),
  };
  return LEASE_MIGRATION_FILES.map((file) => {
    const text = readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8');
    return {
      name: `${table}/${file}`,
      sql: text.replace(/\{\{(\w+)\}\}/g, (m, key: string) => names[key] ?? m),
    };
  });
}

/** The escaped name of the grant function of one lease table (migrations 0002, 0003). */
export function acquireFunctionName(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(`${table}_acquire`)}`;
}

/** The escaped name of the table where waiters register interest in a key (migration 0004). */
export function interestTableName(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(`${table}_interest`)}`;
}

/** The escaped name of the function that sends a grant's notice (migration 0004). */
export function grantNoticeFunctionName(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(`${table}_grant_notice`)}`;
}

/**
 * The escaped name of the grant that sets its own lock timeout and commit mode (migration
 * 0005).
 */
export function grantFunctionName(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(`${table}_grant`)}`;
}

/**
 * The escaped name of the release that sets its own lock timeout and commit mode (migration
 * 0005).
 */
export function releaseFunctionName(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(`${table}_release`)}`;
}

/** What {@link runMigrations} did. */
export interface MigrationReport {
  /** Names applied by this call (empty when everything was already applied). */
  readonly applied: readonly string[];
}

const MIGRATIONS_TABLE = 'leasehold_migrations';
/** Bound for each statement and lock wait of a migration run. */
const MIGRATION_TIMEOUT_MS = 30_000;

/**
 * Applies the `migrations` not yet recorded in `schema.leasehold_migrations`, in order, in
 * one transaction under a transaction-level advisory lock keyed by the schema, so several
 * processes starting at once apply each migration exactly once (the others wait, then find
 * it recorded). A fast path reads the record first and takes no lock when nothing is due.
 * Throws `ERR_UNAVAILABLE` when the database cannot be reached or a migration fails (the
 * transaction is rolled back: nothing half-applied).
 */
export async function runMigrations(
  pool: PgPool,
  schema: string,
  migrations: readonly Migration[],
): Promise<MigrationReport> {
  const record = `${quoteIdent(schema)}.${quoteIdent(MIGRATIONS_TABLE)}`;
  const names = migrations.map((m) => m.name);
  const wanted = `ARRAY[${names.map(quoteLiteral).join(', ')}]::text[]`;
  try {
    const done = lastResult(
      await pool.query(
        `${timeoutPrefix(MIGRATION_TIMEOUT_MS)}SELECT name FROM ${record} WHERE name = ANY(${wanted})`,
      ),
    );
    if (done.rows.length === names.length) return { applied: [] };
  } catch (err) {
    // No schema or record table yet (42P01 / 3F000): take the locked path below.
    const state = sqlState(err);
    if (state !== '42P01' && state !== '3F000') throw unavailable('PostgreSQL lease store', err);
  }
  const { client, done: release } = await checkout(pool, 'migrate');
  const applied: string[] = [];
  try {
    // Bounded like every other statement: a migration that cannot get its locks (another
    // session holding the table) fails instead of hanging a process at start-up.
    await client.query(
      `BEGIN; SET LOCAL statement_timeout = ${MIGRATION_TIMEOUT_MS}; SET LOCAL lock_timeout = ${MIGRATION_TIMEOUT_MS}`,
    );
    await client.query(
      `SELECT pg_advisory_xact_lock(hashtextextended(${quoteLiteral(`leasehold:migrate:${schema}`)}, 0))`,
    );
    // Check before creating: CREATE … IF NOT EXISTS still needs the CREATE privilege.
    const exists = lastResult(
      await client.query(
        `SELECT to_regnamespace(${quoteLiteral(quoteIdent(schema))}) IS NOT NULL AS has_schema,
                to_regclass(${quoteLiteral(record)}) IS NOT NULL AS has_record`,
      ),
    ).rows[0]!;
    if (exists['has_schema'] !== true) await client.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
    if (exists['has_record'] !== true) {
      await client.query(
        `CREATE TABLE ${record} (
           name text PRIMARY KEY,
           applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
         )`,
      );
    }
    const done = new Set(
      lastResult(await client.query(`SELECT name FROM ${record}`)).rows.map((r) => r['name']),
    );
    for (const m of migrations) {
      if (done.has(m.name)) continue;
      await client.query(m.sql);
      await client.query(`INSERT INTO ${record} (name) VALUES (${quoteLiteral(m.name)})`);
      applied.push(m.name);
    }
    await client.query('COMMIT');
    release();
    return { applied };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    release(err);
    throw unavailable('PostgreSQL lease store: migrating the lease table', err);
  }
}

/** Options for {@link migratePostgresLeaseStore}. */
export interface PostgresMigrateOptions extends PostgresConnectionOptions {
  /** The schema of the lease table (created if missing). Defaults to `public`. */
  readonly schema?: string;
  /** The lease table. Defaults to `coordination_lease`, the seed's name. */
  readonly table?: string;
}

/**
 * Creates or upgrades the lease table (and its notify trigger) — what `leasehold migrate`
 * runs. Safe to run from several processes at once and to re-run; forward-only.
 *
 * @example
 * await migratePostgresLeaseStore({ connectionString: process.env.DATABASE_URL });
 */
export async function migratePostgresLeaseStore(
  options: PostgresMigrateOptions,
): Promise<MigrationReport> {
  const schema = checkIdentifier('schema', options.schema ?? 'public');
  const table = checkIdentifier('table', options.table ?? 'coordination_lease');
  const conn = resolveConnection(options);
  try {
    return await runMigrations(conn.pool, schema, leaseMigrations(schema, table));
  } finally {
    if (conn.ownPool) await conn.pool.end();
  }
}

/**
 * Whether the lease table exists — a read-only check that creates nothing (no schema, table or
 * function), for commands that only read. Throws `ERR_UNAVAILABLE` when the database cannot be
 * reached.
 */
export async function postgresLeaseTableExists(options: PostgresMigrateOptions): Promise<boolean> {
  const schema = checkIdentifier('schema', options.schema ?? 'public');
  const table = checkIdentifier('table', options.table ?? 'coordination_lease');
  const conn = resolveConnection(options);
  const name = quoteLiteral(`${quoteIdent(schema)}.${quoteIdent(table)}`);
  try {
    const r = lastResult(
      await conn.pool.query(
        `${timeoutPrefix(MIGRATION_TIMEOUT_MS)}SELECT to_regclass(${name}) IS NOT NULL AS present`,
      ),
    );
    return r.rows[0]?.['present'] === true;
  } catch (err) {
    throw unavailable('PostgreSQL lease store', err);
  } finally {
    if (conn.ownPool) await conn.pool.end();
  }
}
