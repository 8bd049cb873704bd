import { after, before, describe, it } from 'node:test';
import { withPgClient } from '../support/postgres.js';
import { effectLog, resultTokens, startPgBossEnv, type PgBossEnv } from './pg-boss-env.js';
import { SOAK_SIZE, soak, type SoakQueue } from './soak-story.js';

// soak-story.ts on pg-boss: the job's run-time limit is 2 s, the expiry sweep runs every second
// in the test process; the result row and the effect log are written in one fenced statement,
// and pg-boss keeps the completing attempt's output (its token). Bounded: `npm test` runs 150
// jobs with faults for 10 s, chaos 1,000 jobs for 60 s.

describe('pg-boss soak: 8 fenced workers, random SIGSTOP and SIGKILL', () => {
  let env: PgBossEnv;
  before(async () => {
    env = await startPgBossEnv('jobs_pgbs', 2, 100);
  });
  after(async () => {
    await env?.close();
  });

  it(
    'applies every job once by its highest-token attempt, accepts no stale write, loses no job',
    { timeout: 30 * 60_000 },
    async () => {
      const q: SoakQueue = {
        label: 'pg-boss',
        worker: new URL('./pg-boss-worker.js', import.meta.url),
        config: { url: env.url, bossSchema: env.bossSchema, schema: env.schema, queue: env.queue },
        ...SOAK_SIZE,
        settleMs: 120_000,
        keepsOutput: true,
        // insert() answers ids only when asked; finals() counts the queue's jobs.
        enqueue: async (n) => {
          await env.boss.insert(
            env.queue,
            Array.from({ length: n }, (_, i) => ({ data: { n: i } })),
          );
        },
        completed: async () => {
          const r = await withPgClient((c) =>
            c.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${env.bossSchema}".job WHERE name = $1 AND state = 'completed'`,
              [env.queue],
            ),
          );
          return Number(r.rows[0]!.n);
        },
        writes: () => effectLog(env.schema),
        finals: async () => {
          const rowOf = await resultTokens(env.schema);
          const jobs = await withPgClient((c) =>
            c.query<{ id: string; output: { token?: string } | null; retry_count: number }>(
              `SELECT id::text, output, retry_count FROM "${env.bossSchema}".job WHERE name = $1`,
              [env.queue],
            ),
          );
          return jobs.rows.map((j) => ({
            jobId: j.id,
            completedBy: j.output?.token === undefined ? undefined : BigInt(j.output.token),
            result: rowOf.get(j.id),
            attempts: j.retry_count + 1,
          }));
        },
      };
      await soak(q);
    },
  );
});
