import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { CHAOS } from '../support/fault-env.js';
import { withPgClient } from '../support/postgres.js';
import { startPgBossEnv, type PgBossEnv } from './pg-boss-env.js';
import type { PgBossWorkerConfig } from './pg-boss-worker.js';
import { WorkerProcess } from './worker-process.js';

// Issue 44, part 2, on pg-boss: 8 fenced worker processes work a queue while workers are
// stopped (SIGSTOP past the job's 2 s run-time limit, then SIGCONT) and killed (SIGKILL, then
// a new process) at random. Every job writes its result through the fence on its scope, and
// every accepted write is logged in the same statement. At the end: every job completed (none
// lost); per job, the accepted writes' tokens never went down (0 stale accepted); the result
// row holds the highest accepted token; and that is the token of the attempt pg-boss recorded
// as completing the job. Bounded: `npm test` runs 150 jobs with faults for 10 s, chaos 1,000
// jobs for 60 s.

const JOBS = CHAOS ? 1000 : 150;
const FAULT_MS = CHAOS ? 60_000 : 10_000;
const WORKERS = 8;
const SETTLE_MS = 120_000;
const WORKER = new URL('./pg-boss-worker.js', import.meta.url);

describe('pg-boss soak: 8 fenced workers, random SIGSTOP and SIGKILL', () => {
  let env: PgBossEnv;
  const workers: WorkerProcess[] = [];
  before(async () => {
    env = await startPgBossEnv('jobs_pgbs', 2, 100);
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.kill()));
    await env?.close();
  });

  it(
    'applies every job once by its highest-token attempt, accepts no stale write, loses no job',
    { timeout: 30 * 60_000 },
    async () => {
      const config: PgBossWorkerConfig = {
        url: env.url,
        bossSchema: env.bossSchema,
        schema: env.schema,
        queue: env.queue,
        name: 'w',
        fenced: true,
        hold: false,
        soak: true,
      };
      const startWorker = async (i: number) => {
        const w = new WorkerProcess(WORKER, { ...config, name: `w${i}` });
        await w.next((e) => e.ev === 'ready', 60_000, 'ready');
        w.send({ cmd: 'work' });
        return w;
      };
      for (let i = 0; i < WORKERS; i++) workers.push(await startWorker(i));
      // insert() answers ids only when asked; the count of the queue's jobs is checked at the end.
      await env.boss.insert(
        env.queue,
        Array.from({ length: JOBS }, (_, n) => ({ data: { n } })),
      );

      let stops = 0;
      let kills = 0;
      const faultsEnd = Date.now() + FAULT_MS;
      while (Date.now() < faultsEnd) {
        await delay(300 + Math.random() * 700);
        const i = Math.floor(Math.random() * WORKERS);
        const w = workers[i]!;
        if (Math.random() < 0.6) {
          stops++;
          w.stop();
          // Past the job's 2 s limit, so its job is handed to another worker meanwhile.
          setTimeout(() => w.cont(), 2500 + Math.random() * 1500).unref();
        } else {
          kills++;
          await w.kill();
          workers[i] = await startWorker(i);
        }
      }
      for (const w of workers) w.cont();

      // Every job completed, within a bound.
      const settleEnd = Date.now() + SETTLE_MS;
      let open = JOBS;
      while (Date.now() < settleEnd) {
        const r = await withPgClient((c) =>
          c.query<{ n: string }>(
            `SELECT count(*) AS n FROM "${env.bossSchema}".job WHERE name = $1 AND state <> 'completed'`,
            [env.queue],
          ),
        );
        open = Number(r.rows[0]!.n);
        if (open === 0) break;
        await delay(500);
      }
      assert.equal(open, 0, `${open} jobs not completed`);

      const figures = await withPgClient(async (c) => {
        const log = await c.query<{ job_id: string; token: string }>(
          `SELECT job_id, token::text AS token FROM "${env.schema}".effect_log ORDER BY seq`,
        );
        const rows = await c.query<{ job_id: string; token: string }>(
          `SELECT job_id, token::text AS token FROM "${env.schema}".job_result`,
        );
        const jobs = await c.query<{ id: string; output: { token?: string }; retry_count: number }>(
          `SELECT id::text, output, retry_count FROM "${env.bossSchema}".job WHERE name = $1`,
          [env.queue],
        );
        return { log: log.rows, rows: rows.rows, jobs: jobs.rows };
      });
      const maxOf = new Map<string, bigint>();
      let staleAccepted = 0;
      for (const e of figures.log) {
        const t = BigInt(e.token);
        const max = maxOf.get(e.job_id) ?? 0n;
        if (t < max) staleAccepted++;
        else maxOf.set(e.job_id, t);
      }
      const rowOf = new Map(figures.rows.map((r) => [r.job_id, BigInt(r.token)]));
      let wrongResult = 0;
      let attempts = 0;
      for (const j of figures.jobs) {
        attempts += j.retry_count + 1;
        const completedBy = j.output?.token === undefined ? undefined : BigInt(j.output.token);
        if (
          completedBy === undefined ||
          rowOf.get(j.id) !== completedBy ||
          maxOf.get(j.id) !== completedBy
        ) {
          wrongResult++;
          process.stdout.write(
            `# wrong: job ${j.id} output ${JSON.stringify(j.output)} row ${rowOf.get(j.id)} max ${maxOf.get(j.id)} log ${JSON.stringify(figures.log.filter((e) => e.job_id === j.id).map((e) => e.token))} retries ${j.retry_count}\n`,
          );
        }
      }
      const summary = {
        jobs: JOBS,
        attempts,
        acceptedWrites: figures.log.length,
        staleAccepted,
        wrongResult,
        stops,
        kills,
      };
      process.stdout.write(`# pg-boss soak: ${JSON.stringify(summary)}\n`);
      assert.equal(figures.jobs.length, JOBS);
      assert.equal(staleAccepted, 0);
      assert.equal(wrongResult, 0);
      assert.ok(stops + kills > 0);
    },
  );
});
