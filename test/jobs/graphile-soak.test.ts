import { after, before, describe, it } from 'node:test';
import { withPgClient } from '../support/postgres.js';
import { startGraphileEnv, type GraphileEnv } from './graphile-env.js';
import { effectLog, resultTokens } from './pg-boss-env.js';
import { SOAK_SIZE, soak, type SoakQueue } from './soak-story.js';

// soak-story.ts on graphile-worker. graphile-worker takes a job back from a silent worker only
// after 4 hours, or when an operator declares the worker dead with forceUnlockWorkers: the
// test does the latter for every worker it stops or kills, at once, so a stopped worker's job
// is handed out while the worker may still resume and finish it. The result row and the effect
// log are written in one fenced statement. graphile-worker deletes a completed job and keeps no
// output, so the completing attempt is the one whose worker reported it (at most one per job).
// Bounded: `npm test` runs 150 jobs with faults for 10 s, chaos 1,000 jobs for 60 s.

const TASK = 'jobs_gws_task';

describe('graphile-worker soak: 8 fenced workers, random SIGSTOP and SIGKILL', () => {
  let env: GraphileEnv;
  let ids: string[] = [];
  const killed: string[] = [];
  before(async () => {
    env = await startGraphileEnv('jobs_gws');
  });
  after(async () => {
    await env?.close();
  });

  it(
    'applies every job once by its highest-token attempt, accepts no stale write, loses no job',
    { timeout: 30 * 60_000 },
    async () => {
      const q: SoakQueue = {
        label: 'graphile-worker',
        worker: new URL('./graphile-worker-process.js', import.meta.url),
        config: { url: env.url, workerSchema: env.workerSchema, schema: env.schema, task: TASK },
        ...SOAK_SIZE,
        // A refused attempt is retried after graphile-worker's backoff (e^attempts seconds).
        settleMs: 180_000,
        keepsOutput: false,
        // The lock holder graphile-worker records is the process's worker pool.
        working: async (w) => {
          await w.next((e) => e.ev === 'pool', 60_000, 'pool');
        },
        lost: async (w, how) => {
          const poolId = w.events.find((e) => e.ev === 'pool')?.['poolId'] as string;
          if (how === 'killed') killed.push(poolId);
          await env.utils.forceUnlockWorkers([poolId]);
        },
        enqueue: async (n) => {
          const jobs = await env.utils.addJobs(
            Array.from({ length: n }, (_, i) => ({
              identifier: TASK,
              payload: { n: i },
              maxAttempts: 100,
            })),
          );
          ids = jobs.map((j) => j.id);
        },
        completed: async () => {
          // The operator sweeps the dead workers again: a killed process's server session may
          // still commit its last fetch (locking a job) after the first sweep.
          if (killed.length > 0) await env.utils.forceUnlockWorkers(killed);
          const r = await withPgClient((c) =>
            c.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${env.workerSchema}"._private_jobs WHERE id = ANY($1::bigint[])`,
              [ids],
            ),
          );
          return ids.length - Number(r.rows[0]!.n);
        },
        describeOpen: async () => {
          const r = await withPgClient((c) =>
            c.query(
              `SELECT id, attempts, locked_by, run_at, last_error FROM "${env.workerSchema}"._private_jobs WHERE id = ANY($1::bigint[])`,
              [ids],
            ),
          );
          return JSON.stringify(r.rows);
        },
        writes: () => effectLog(env.schema),
        finals: async () => {
          const rowOf = await resultTokens(env.schema);
          return ids.map((jobId) => ({
            jobId,
            completedBy: undefined,
            result: rowOf.get(jobId),
            attempts: 0,
          }));
        },
      };
      await soak(q);
    },
  );
});
