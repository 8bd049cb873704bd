import {
  checkout,
  lastResult,
  quoteIdent,
  quoteLiteral,
  timeoutPrefix,
  type PgPool,
} from './client.js';
import { sqlState, unavailable } from './errors.js';

/** One forward-only migration: a name recorded once applied, and its SQL. */
export interface Migration {
  readonly name: string;
  readonly sql: string;
}

/** What {@link runMigrations} did. */
export interface MigrationReport {
  /** Names applied by this call (empty when everything was already applied). */
  readonly applied: readonly string[];
}

const MIGRATIONS_TABLE = 'leasehold_migrations';
/** Bound for each statement and lock wait of a migration run. */
export const MIGRATION_TIMEOUT_MS = 30_000;

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
