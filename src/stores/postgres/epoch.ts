import { invalidArgument } from '../../core/errors.js';
import { LIMITS, parseToken } from '../../core/validate.js';
import {
  checkIdentifier,
  checkout,
  lastResult,
  quoteIdent,
  quoteLiteral,
  parseBigint,
  resolveConnection,
  type PostgresConnectionOptions,
} from '../../drivers/postgres/client.js';
import { unavailable } from '../../drivers/postgres/errors.js';

/**
 * Tokens per millisecond of wall-clock time reserved by the epoch floor. The floor after a
 * restore at time T is `T_ms × 1024`; it exceeds every token issued before as long as no key
 * was granted 1024 or more times per millisecond on average since the previous epoch (or,
 * before any epoch, since 1970). It keeps tokens far below 2^63 (until the year ~287,000).
 */
export const EPOCH_TOKENS_PER_MS = 1024n;

/** Options for {@link advancePostgresFencingEpoch}. */
export interface PostgresEpochOptions extends PostgresConnectionOptions {
  /** The schema of the lease table. Defaults to `public`. */
  readonly schema?: string;
  /** The lease table. Defaults to `coordination_lease`. */
  readonly table?: string;
  /**
   * A floor known from outside the restored database — for instance the highest token any
   * fenced resource has recorded. The epoch floor is at least this. Optional: the default
   * floor comes from the database clock (see {@link EPOCH_TOKENS_PER_MS}).
   */
  readonly atLeast?: bigint | string;
}

/** What {@link advancePostgresFencingEpoch} did. */
export interface PostgresEpochReport {
  /** Every later grant gets a token greater than this. */
  readonly floor: bigint;
  /** Rows whose counter was raised (and whose holder, if any, was cleared). */
  readonly rowsRaised: number;
}

/**
 * Advances the fencing epoch of a lease table after the database was restored from a backup,
 * so that every later token exceeds every token issued before the restore — including the
 * tokens of grants the backup never saw (DESIGN §2).
 *
 * The restored database cannot know the lost tokens, so the floor comes from outside its
 * state: `F = max(clock_ms × 1024, highest token in the table, atLeast)`, with the database's
 * clock; the highest token counts the tokens reserved by a token block (decision 007, column
 * `fencing_token_block`), not only the ones granted. In one transaction, holding a lock that
 * stops grants meanwhile:
 * - every row's counter is raised to `F`, its block cleared and its holder cleared (restored
 *   leases are not trusted: a renewal from a pre-restore holder now fails, its token no
 *   longer matches);
 * - a `BEFORE INSERT` trigger raises the first token of any key created later to `F + 1` —
 *   also for programs that insert with the seed's literal `1`; a block reserved by that first
 *   grant moves up with it (the row stores the block's size, not its top).
 *
 * A table restored from before migration 0003 has no block column; the floor is then taken
 * from the tokens alone (there were no blocks), and the migration adds the column later.
 *
 * Run it after every restore, before clients come back; running it again is harmless (the
 * floor only grows). Assumptions, documented in docs/postgres.md: fewer than 1024 grants per
 * key per millisecond on average between epochs, and a database clock that does not run
 * behind the clock of the previous epoch.
 *
 * Throws `ERR_UNAVAILABLE` when the database cannot be reached or the table does not exist.
 */
export async function advancePostgresFencingEpoch(
  options: PostgresEpochOptions,
): Promise<PostgresEpochReport> {
  const schema = checkIdentifier('schema', options.schema ?? 'public');
  const table = checkIdentifier('table', options.table ?? 'coordination_lease');
  const atLeast = options.atLeast === undefined ? 0n : parseToken(options.atLeast, 'atLeast');
  const lease = `${quoteIdent(schema)}.${quoteIdent(table)}`;
  const fn = `${quoteIdent(schema)}.${quoteIdent(`${table}_token_floor`)}`;
  const trigger = quoteIdent(`${table}_token_floor`);
  const conn = resolveConnection(options);
  try {
    const { client, done: release } = await checkout(conn.pool, 'epoch');
    try {
      await client.query(
        'BEGIN; SET LOCAL synchronous_commit = on; SET LOCAL statement_timeout = 60000; SET LOCAL lock_timeout = 30000',
      );
      // Conflicts with every grant, renew and release (ROW EXCLUSIVE) and with itself, but
      // not with readers: the floor and the raise see a table nobody changes meanwhile.
      await client.query(`LOCK TABLE ${lease} IN SHARE ROW EXCLUSIVE MODE`);
      const blocks = hasBlockColumn(
        lastResult(
          await client.query(
            `SELECT EXISTS (SELECT 1 FROM pg_attribute
                            WHERE attrelid = ${quoteLiteral(lease)}::regclass
                              AND attname = 'fencing_token_block' AND NOT attisdropped) AS blocks`,
          ),
        ).rows[0],
      );
      // The top of each row's last block; written so that a top at int64's maximum cannot
      // overflow.
      const top = blocks
        ? 'fencing_token + (COALESCE(fencing_token_block, 1) - 1)'
        : 'fencing_token';
      const row = lastResult(
        await client.query(
          `SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint * ${EPOCH_TOKENS_PER_MS})::text AS clock_floor,
                  COALESCE(max(${top}), 0)::text AS highest
           FROM ${lease}`,
        ),
      ).rows[0]!;
      let floor = parseBigint(row['clock_floor']);
      const clockMs = floor / EPOCH_TOKENS_PER_MS;
      const highest = parseBigint(row['highest']);
      if (highest > floor) floor = highest;
      if (atLeast > floor) floor = atLeast;
      // Room above the floor for a first grant's whole block.
      if (floor > LIMITS.maxToken - BigInt(LIMITS.maxTokenBlock)) {
        throw invalidArgument('atLeast', 'leaves no room for later tokens below 2^63', floor);
      }
      const raised = lastResult(
        await client.query(
          `UPDATE ${lease}
           SET fencing_token = ${floor}, owner_id = NULL, lease_until = '-infinity'::timestamptz,
               owner_name = NULL, value = NULL, details_owner_id = NULL
               ${blocks ? ', fencing_token_block = NULL' : ''}
           WHERE fencing_token < ${floor} OR owner_id IS NOT NULL
                 ${blocks ? 'OR fencing_token_block IS NOT NULL' : ''}`,
        ),
      );
      await client.query(
        `CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $fn$
         BEGIN
           IF NEW.fencing_token <= ${floor} THEN NEW.fencing_token := ${floor + 1n}; END IF;
           RETURN NEW;
         END
         $fn$`,
      );
      await client.query(`DROP TRIGGER IF EXISTS ${trigger} ON ${lease}`);
      // The WHEN clause is evaluated without calling the function, so grants that do not
      // need raising cost nothing extra.
      await client.query(
        `CREATE TRIGGER ${trigger} BEFORE INSERT ON ${lease}
         FOR EACH ROW WHEN (NEW.fencing_token <= ${floor}) EXECUTE FUNCTION ${fn}()`,
      );
      await client.query(
        `COMMENT ON TRIGGER ${trigger} ON ${lease} IS 'leasehold fencing epoch floor ${floor}'`,
      );
      // The store's own failover check (migration 0008, decision 042) carries the previous
      // floor forward at the next change: it must know this one, which may be above the clock.
      const incarnation = quoteLiteral(
        `${quoteIdent(schema)}.${quoteIdent(`${table}_incarnation`)}`,
      );
      await client.query(
        `DO $do$ BEGIN
           IF to_regclass(${incarnation}) IS NOT NULL THEN
             EXECUTE format('UPDATE %s SET floor = %s, floor_at_ms = %s WHERE floor < %s',
               to_regclass(${incarnation}), ${floor}, ${clockMs}, ${floor});
           END IF;
         END $do$`,
      );
      await client.query('COMMIT');
      release();
      return { floor, rowsRaised: raised.rowCount ?? 0 };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      release(err);
      throw unavailable('epoch', err);
    }
  } finally {
    if (conn.ownPool) await conn.pool.end();
  }
}

/** Whether the lease table has migration 0003's `fencing_token_block` column. */
function hasBlockColumn(row: Record<string, unknown> | undefined): boolean {
  return row?.['blocks'] === true;
}
