import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  channelName,
  checkIdentifier,
  lastResult,
  quoteIdent,
  quoteLiteral,
  resolveConnection,
  timeoutPrefix,
  type PostgresConnectionOptions,
} from '../../drivers/postgres/client.js';
import { unavailable } from '../../drivers/postgres/errors.js';
import {
  MIGRATION_TIMEOUT_MS,
  runMigrations,
  type Migration,
  type MigrationReport,
} from '../../drivers/postgres/migrate.js';

// Kept only for src/fencing/catalog/pointers/, which is being changed elsewhere now and still
// imports the runner from here; delete once it imports src/drivers/postgres/ (issue 47).
export { runMigrations, type Migration } from '../../drivers/postgres/migrate.js';

/** The lease store's migrations, in order. Files are never edited once released: add a new one. */
export const LEASE_MIGRATION_FILES = [
  '0001_lease.sql',
  '0002_acquire_function.sql',
  '0003_token_block.sql',
  '0004_waiter_interest.sql',
  '0005_grant_release_functions.sql',
  '0006_notify_other_listeners.sql',
  '0007_grant_update_first.sql',
  '0008_incarnation.sql',
  '0009_retention_floor.sql',
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
    incarnation: `${quoteIdent(schema)}.${quoteIdent(`${table}_incarnation`)}`,
    incarnation_fn: incarnationFunctionName(schema, table),
    incarnation_guc: quoteLiteral(incarnationSetting(schema, table)),
    floor_fn: `${quoteIdent(schema)}.${quoteIdent(`${table}_token_floor`)}`,
    floor_trigger: quoteIdent(`${table}_token_floor`),
    ...retentionNames(schema, table),
  };
  return LEASE_MIGRATION_FILES.map((file) => {
    const text = readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8');
    return {
      name: `${table}/${file}`,
      sql: text.replace(/\{\{(\w+)\}\}/g, (m, key: string) => names[key] ?? m),
    };
  });
}

/** The names of migration 0009's retention floor (decision 049). */
export function retentionNames(schema: string, table: string): Record<string, string> {
  return {
    retention: `${quoteIdent(schema)}.${quoteIdent(`${table}_retention`)}`,
    retention_fn: `${quoteIdent(schema)}.${quoteIdent(`${table}_token_retention`)}`,
    retention_trigger: quoteIdent(`${table}_token_retention`),
    retention_lock: quoteLiteral(`leasehold retention ${schema}.${table}`),
  };
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

/** The escaped name of the function that checks the server's incarnation (migration 0008). */
export function incarnationFunctionName(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(`${table}_incarnation_check`)}`;
}

/**
 * The session setting where a connection remembers that it checked the incarnation of one
 * lease table (migration 0008): a custom setting name is `prefix.identifier`, so the schema
 * and table go in as a hash.
 */
export function incarnationSetting(schema: string, table: string): string {
  const digest = createHash('sha256').update(`${schema}.${table}`).digest('hex').slice(0, 20);
  return `leasehold.incarnation_${digest}`;
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
