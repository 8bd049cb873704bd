import { Logger, makeWorkerUtils, runMigrations, type WorkerUtils } from 'graphile-worker';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../support/postgres.js';

/**
 * A graphile-worker install of a test's own (its own schema, dropped after), with the lease
 * table, the fence and the test's result table in a second schema of its own.
 */
export interface GraphileEnv {
  readonly url: string;
  readonly workerSchema: string;
  readonly schema: string;
  readonly utils: WorkerUtils;
  close(): Promise<void>;
}

export async function startGraphileEnv(label: string): Promise<GraphileEnv> {
  const workerSchema = uniqueSchema(`${label}_gw`);
  const schema = uniqueSchema(label);
  await withPgClient((c) => c.query(`CREATE SCHEMA "${schema}"`));
  await withPgClient((c) =>
    c.query(
      `CREATE TABLE "${schema}".job_result (job_id text PRIMARY KEY, value text NOT NULL, token bigint, writes int NOT NULL DEFAULT 1);
       CREATE TABLE "${schema}".effect_log (seq bigserial PRIMARY KEY, job_id text NOT NULL, token bigint)`,
    ),
  );
  await runMigrations({ connectionString: PG_URL, schema: workerSchema, logger: quietLogger() });
  const utils = await makeWorkerUtils({ connectionString: PG_URL, schema: workerSchema });
  return {
    url: PG_URL,
    workerSchema,
    schema,
    utils,
    async close() {
      await utils.release();
      await dropSchema(workerSchema);
      await dropSchema(schema);
    },
  };
}

/** A graphile-worker logger that drops everything. */
export function quietLogger(): Logger {
  return new Logger(() => () => undefined);
}

/** Whether the job's row is gone (graphile-worker deletes a completed job). */
export async function jobGone(workerSchema: string, id: string): Promise<boolean> {
  const r = await withPgClient((c) =>
    c.query(`SELECT 1 FROM "${workerSchema}"._private_jobs WHERE id = $1::bigint`, [id]),
  );
  return r.rows.length === 0;
}
