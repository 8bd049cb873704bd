import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { CHAOS } from '../support/fault-env.js';
import { REDIS, startBullMqEnv, type BullMqEnv } from './bullmq-env.js';
import type { BullMqWorkerConfig } from './bullmq-worker.js';
import { WorkerProcess } from './worker-process.js';

// Issue 44, part 2, on BullMQ, under LEASEHOLD_CHAOS=1 only (npm test runs the pg-boss soak):
// 8 fenced worker processes, workers stopped past the job's 1 s lock and killed at random;
// 1,000 jobs each write their token and a log entry in one fenced step. At the end: every job
// completed, per job the logged tokens never went down, and the result and BullMQ's recorded
// return value both name the highest logged token.

const JOBS = 1000;
const FAULT_MS = 60_000;
const WORKERS = 8;
const SETTLE_MS = 180_000;
const WORKER = new URL('./bullmq-worker.js', import.meta.url);

describe(
  'BullMQ soak: 8 fenced workers, random SIGSTOP and SIGKILL',
  { skip: CHAOS ? false : 'runs under LEASEHOLD_CHAOS=1 (npm run chaos)' },
  () => {
    let env: BullMqEnv;
    let redis: Redis;
    const workers: WorkerProcess[] = [];
    before(async () => {
      env = await startBullMqEnv('jobs_bulls');
      redis = new Redis(REDIS);
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.kill()));
      redis?.disconnect();
      await env?.close();
    });

    it(
      'applies every job once by its highest-token attempt, accepts no stale write, loses no job',
      { timeout: 30 * 60_000 },
      async () => {
        const config: BullMqWorkerConfig = {
          prefix: env.prefix,
          queueName: env.queueName,
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
        const jobs = await env.queue.addBulk(
          Array.from({ length: JOBS }, (_, n) => ({
            name: 'job',
            data: { n },
            opts: { attempts: 100 },
          })),
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
            setTimeout(() => w.cont(), 2500 + Math.random() * 1500).unref();
          } else {
            kills++;
            await w.kill();
            workers[i] = await startWorker(i);
          }
        }
        for (const w of workers) w.cont();
        const settleEnd = Date.now() + SETTLE_MS;
        let completed = 0;
        while (Date.now() < settleEnd) {
          completed = (await env.queue.getJobCounts('completed')).completed ?? 0;
          if (completed === JOBS) break;
          await delay(500);
        }
        assert.equal(completed, JOBS, `${completed} of ${JOBS} jobs completed`);

        const log = await redis.lrange(`${env.prefix}:effect_log`, 0, -1);
        const maxOf = new Map<string, bigint>();
        let staleAccepted = 0;
        for (const entry of log) {
          const [id, t] = entry.split(':') as [string, string];
          const token = BigInt(t);
          if (token < (maxOf.get(id) ?? 0n)) staleAccepted++;
          else maxOf.set(id, token);
        }
        let wrongResult = 0;
        let attempts = 0;
        for (const j of jobs) {
          const job = await env.queue.getJob(j.id!);
          attempts += job?.attemptsStarted ?? 0;
          const out = job?.returnvalue as { token?: string } | undefined;
          const result = await redis.get(`${env.prefix}:result:${j.id}`);
          const max = maxOf.get(j.id!);
          if (out?.token === undefined || result !== out.token || max !== BigInt(out.token))
            wrongResult++;
        }
        const summary = {
          jobs: JOBS,
          attempts,
          acceptedWrites: log.length,
          staleAccepted,
          wrongResult,
          stops,
          kills,
        };
        process.stdout.write(`# BullMQ soak: ${JSON.stringify(summary)}\n`);
        assert.equal(staleAccepted, 0);
        assert.equal(wrongResult, 0);
      },
    );
  },
);
