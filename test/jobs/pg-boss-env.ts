import { PgBoss } from 'pg-boss';
import { LeaseClient } from '../../src/core/client.js';
import { PostgresFence } from '../../src/fencing/postgres.js';
import { PostgresLeaseStore } from '../../src/stores/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../support/postgres.js';

/**
 * A pg-boss install of a test's own (its own schema, dropped after) with the lease table and
 * the fence table in a second schema of the test's own, all in the shared test database.
 */
export interface PgBossEnv {
  readonly url: string;
  /** pg-boss's schema. */
  readonly bossSchema: string;
  /** The lease table's, the fence's and the test's result table's schema. */
  readonly schema: string;
  readonly queue: string;
  /** The test's own PgBoss: it sends jobs and runs the expiry sweep every second. */
  readonly boss: PgBoss;
  close(): Promise<void>;
}

/** pg-boss options every process of a test uses for the test's install. */
export function bossOptions(url: string, schema: string, supervise: boolean) {
  return {
    connectionString: url,
    schema,
    supervise,
    superviseIntervalSeconds: 1,
    // Expiry runs in the monitor step, which runs at most once per monitorIntervalSeconds.
    monitorIntervalSeconds: 1,
    schedule: false,
    migrate: supervise,
    createSchema: supervise,
    max: 4,
  };
}

/**
 * Starts a pg-boss install and creates `queue` with a run-time limit of `expireInSeconds` and
 * immediate retries.
 */
export async function startPgBossEnv(
  label: string,
  expireInSeconds: number,
  retryLimit = 5,
): Promise<PgBossEnv> {
  const bossSchema = uniqueSchema(`${label}_boss`);
  const schema = uniqueSchema(label);
  await withPgClient((c) => c.query(`CREATE SCHEMA "${schema}"`));
  await withPgClient((c) =>
    c.query(
      `CREATE TABLE "${schema}".job_result (job_id text PRIMARY KEY, value text NOT NULL, token bigint, writes int NOT NULL DEFAULT 1);
       CREATE TABLE "${schema}".effect_log (seq bigserial PRIMARY KEY, job_id text NOT NULL, token bigint)`,
    ),
  );
  const boss = new PgBoss(bossOptions(PG_URL, bossSchema, true));
  boss.on('error', () => undefined);
  await boss.start();
  const queue = `q_${label}`;
  await boss.createQueue(queue, { expireInSeconds, retryLimit, retryDelay: 0 });
  return {
    url: PG_URL,
    bossSchema,
    schema,
    queue,
    boss,
    async close() {
      await boss.stop({ graceful: false }).catch(() => undefined);
      await dropSchema(bossSchema);
      await dropSchema(schema);
    },
  };
}

/** A lease client and a fence on a test's schema, for one process. */
export function leaseParts(url: string, schema: string) {
  const store = new PostgresLeaseStore({ connectionString: url, schema, maxConnections: 4 });
  const client = new LeaseClient({ store });
  const fence = new PostgresFence({ connectionString: url, schema, maxConnections: 4 });
  return {
    store,
    client,
    fence,
    async close() {
      await client.close();
      await fence.close();
      await store.close();
    },
  };
}

/** The job's state, output and retry count in pg-boss's table. */
export async function jobRow(
  env: { bossSchema: string },
  id: string,
): Promise<{ state: string; output: unknown; retry_count: number } | undefined> {
  const r = await withPgClient((c) =>
    c.query<{ state: string; output: unknown; retry_count: number }>(
      `SELECT state, output, retry_count FROM "${env.bossSchema}".job WHERE id = $1`,
      [id],
    ),
  );
  return r.rows[0];
}

/** The test's result row for `jobId`. */
export async function resultRow(
  schema: string,
  jobId: string,
): Promise<{ value: string; token: string | null; writes: number } | undefined> {
  const r = await withPgClient((c) =>
    c.query<{ value: string; token: string | null; writes: number }>(
      `SELECT value, token::text AS token, writes FROM "${schema}".job_result WHERE job_id = $1`,
      [jobId],
    ),
  );
  return r.rows[0];
}

/**
 * The upsert a job's handler makes: its value, and how many writes reached the row; each write
 * is also appended to `effect_log` in the same statement, in commit order of its `seq`.
 */
export function resultUpsert(schema: string): string {
  return `WITH logged AS (INSERT INTO "${schema}".effect_log (job_id, token) VALUES ($1, $3::bigint))
    INSERT INTO "${schema}".job_result (job_id, value, token) VALUES ($1, $2, $3::bigint)
    ON CONFLICT (job_id) DO UPDATE SET value = EXCLUDED.value, token = EXCLUDED.token,
      writes = "${schema}".job_result.writes + 1`;
}

/** The accepted writes of a soak on PostgreSQL, in commit order. */
export async function effectLog(schema: string): Promise<{ jobId: string; token: bigint }[]> {
  const r = await withPgClient((c) =>
    c.query<{ job_id: string; token: string }>(
      `SELECT job_id, token::text AS token FROM "${schema}".effect_log ORDER BY seq`,
    ),
  );
  return r.rows.map((e) => ({ jobId: e.job_id, token: BigInt(e.token) }));
}

/** The token in each job's result row. */
export async function resultTokens(schema: string): Promise<Map<string, bigint>> {
  const r = await withPgClient((c) =>
    c.query<{ job_id: string; token: string }>(
      `SELECT job_id, token::text AS token FROM "${schema}".job_result`,
    ),
  );
  return new Map(r.rows.map((e) => [e.job_id, BigInt(e.token)]));
}
