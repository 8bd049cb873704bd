import { LeaseholdError } from '../../core/errors.js';
import {
  checkIdentifier,
  checkout,
  lastResult,
  parseBigint,
  quoteIdent,
  quoteLiteral,
  resolveConnection,
  type PostgresConnectionOptions,
} from '../../drivers/postgres/client.js';
import { unavailable } from '../../drivers/postgres/errors.js';
import { resolvePruneOptions, type PruneOptions, type PruneReport } from '../retention-report.js';

/**
 * Retention for a PostgreSQL lease table (decision 049): deletes the rows of released keys and
 * of keys expired longer than a grace period, and raises the retention floor (migration 0009)
 * to at least the top of every deleted row's last token block, in the same transaction. A new
 * row's first token is raised above that floor by a BEFORE INSERT trigger, so a later grant of
 * a deleted key, or of a key never seen, gets a token above every token that key ever had.
 * Live rows are not touched: grants of existing keys count from the row's own token.
 *
 * Each batch is one transaction holding the table's retention lock exclusively (inserts of new
 * keys wait for it; see the migration), deleting at most `batch` rows that no other
 * transaction has locked (SKIP LOCKED: a grant in progress is never waited for).
 */

/** Options of {@link prunePostgresKeys}. */
export interface PostgresPruneOptions extends PruneOptions, PostgresConnectionOptions {
  /** The schema of the lease table. Defaults to `public`. */
  readonly schema?: string;
  /** The lease table. Defaults to `coordination_lease`. The store must have opened it once. */
  readonly table?: string;
}

/**
 * Deletes released and long-expired keys in batches (see the module comment). Safe while
 * stores use the table. Throws `ERR_UNAVAILABLE` when the database cannot be reached or the
 * table has no retention floor yet (open a store of this version on it first).
 */
export function prunePostgresKeys(options: PostgresPruneOptions): Promise<PruneReport> {
  return prunePostgres(options, true);
}

/** The pass; `raiseFloor: false` only for the test that shows a prune without the floor. */
export async function prunePostgres(
  options: PostgresPruneOptions,
  raiseFloor: boolean,
): Promise<PruneReport> {
  const { olderThanMs, batch, maxDeleted } = resolvePruneOptions(options);
  const schema = checkIdentifier('schema', options.schema ?? 'public');
  const table = checkIdentifier('table', options.table ?? 'coordination_lease');
  const lease = `${quoteIdent(schema)}.${quoteIdent(table)}`;
  const retention = `${quoteIdent(schema)}.${quoteIdent(`${table}_retention`)}`;
  const lock = `hashtext(${quoteLiteral(`leasehold retention ${schema}.${table}`)})`;
  const free = `(owner_id IS NULL OR lease_until <= clock_timestamp() - $1 * interval '1 millisecond')`;
  const raise = raiseFloor
    ? `UPDATE ${retention} SET floor = GREATEST(floor, COALESCE((SELECT top FROM m), 0)) WHERE id = 1 RETURNING 1`
    : `SELECT 1 FROM ${retention} WHERE id = 1`;
  const statement = `
    WITH gone AS (
      DELETE FROM ${lease} WHERE resource_key IN (
        SELECT resource_key FROM ${lease} WHERE ${free} LIMIT $2 FOR UPDATE SKIP LOCKED)
      AND ${free}
      RETURNING fencing_token + (COALESCE(fencing_token_block, 1) - 1) AS top),
    m AS (SELECT count(*) AS n, max(top) AS top FROM gone),
    raised AS (${raise})
    SELECT (SELECT n FROM m)::int AS n,
           (SELECT floor FROM ${retention} WHERE id = 1)::text AS old_floor,
           GREATEST((SELECT floor FROM ${retention} WHERE id = 1),
                    ${raiseFloor ? 'COALESCE((SELECT top FROM m), 0)' : '0'})::text AS floor,
           (SELECT count(*) FROM raised) AS raised`;
  const conn = resolveConnection(options);
  let deleted = 0;
  let batches = 0;
  let floor = 0n;
  try {
    const { client, done } = await checkout(conn.pool, 'prune');
    try {
      while (deleted < maxDeleted) {
        const limit = Math.min(batch, maxDeleted - deleted);
        await client.query(
          `BEGIN; SET LOCAL statement_timeout = 60000; SET LOCAL lock_timeout = 30000; SELECT pg_advisory_xact_lock(${lock})`,
        );
        const row = lastResult(await client.query(statement, [olderThanMs, limit])).rows[0]!;
        await client.query('COMMIT');
        batches++;
        const n = Number(row['n']);
        deleted += n;
        floor = parseBigint(row['floor']);
        if (n < limit) break;
      }
      done();
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      done(err);
      throw err;
    }
    return { deleted, floor, batches };
  } catch (err) {
    if (err instanceof LeaseholdError) throw err;
    throw unavailable('prune', err);
  } finally {
    if (conn.ownPool) await conn.pool.end();
  }
}
