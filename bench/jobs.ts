// `npm run bench -- --only jobs`: jobs/s through pg-boss, BullMQ and graphile-worker, each
// alone ("raw queue") and through leasehold's fenced-attempt adapter, in the same run, rounds
// interleaved. The handler does nothing, so the rows measure what the adapter adds to a job's
// trip through the queue: a lease acquire, one queue heartbeat, the token's claim, the fenced
// report and the release. A second scenario's handler waits 50 ms (a job that does some I/O),
// over which that fixed cost is spread. Each round enqueues its jobs first, then times
// draining them.
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { EventEmitter } from 'node:events';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { makeWorkerUtils, run, Logger, runMigrations, type Task } from 'graphile-worker';
import { LeaseClient } from '../src/core/client.js';
import { PostgresFence } from '../src/fencing/postgres.js';
import { RedisFence } from '../src/fencing/redis.js';
import { BullMqFencedWorker } from '../src/jobs/bullmq.js';
import { fencedTask } from '../src/jobs/graphile-worker.js';
import { PgBossFencedWorker } from '../src/jobs/pg-boss.js';
import { PostgresLeaseStore } from '../src/stores/postgres/index.js';
import { RedisLeaseStore } from '../src/stores/redis/index.js';
import { percentile, type BenchOptions, type BenchResult } from './lib.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
/** Jobs worked at once, by one process. */
const WORKERS = 4;
const ROUNDS = 3;

/** One queue's two arms: each enqueues `n` jobs, then drains them; resolves the drain's ms. */
interface QueueArms {
  /** The queue and the handler's wait, for the scenario's name. */
  readonly name: string;
  raw(n: number): Promise<number>;
  fenced(n: number): Promise<number>;
  close(): Promise<void>;
}

/** The handler's wait per job in each scenario: none, and a job doing some I/O. */
const HANDLER_MS = [0, 50];

export async function jobsBenchmarks(o: BenchOptions): Promise<BenchResult[]> {
  // About `durationMs` of draining per arm and round at a few hundred jobs/s.
  const n = Math.max(100, Math.round(o.durationMs / 5));
  const results: BenchResult[] = [];
  for (const handlerMs of HANDLER_MS) {
    for (const make of [pgBossArms, bullMqArms, graphileArms]) {
      const arms = await make(handlerMs);
      try {
        // Fewer jobs where each takes 50 ms: the same order of time per round.
        results.push(...(await measure(arms, handlerMs === 0 ? n : Math.ceil(n / 4))));
      } finally {
        await arms.close();
      }
    }
  }
  return results;
}

/** The job's work: nothing, or a wait of `ms`. */
const work = (ms: number) => (ms === 0 ? Promise.resolve() : delay(ms));

async function measure(arms: QueueArms, n: number): Promise<BenchResult[]> {
  const rate = { raw: [] as number[], fenced: [] as number[] };
  const cpu = { raw: [] as number[], fenced: [] as number[] };
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const arm of ['raw', 'fenced'] as const) {
      const cpu0 = process.cpuUsage();
      const ms = await arms[arm](n);
      const used = process.cpuUsage(cpu0);
      rate[arm].push((n / ms) * 1000);
      cpu[arm].push((used.user + used.system) / 1000 / (n / 1000));
    }
    ratios.push(rate.fenced[r]! / rate.raw[r]!);
  }
  const row = (arm: 'raw' | 'fenced'): BenchResult => ({
    suite: 'jobs',
    subject: arm === 'raw' ? 'raw queue' : 'leasehold fenced attempts',
    scenario: `${arms.name}, ${n} jobs`,
    workers: WORKERS,
    keys: 'distinct',
    cyclesPerSec: percentile(rate[arm], 50),
    cpuMsPer1000: percentile(cpu[arm], 50),
    ...(arm === 'fenced'
      ? {
          ratioToRaw: percentile(ratios, 50),
          cpuRatioToRaw: percentile(cpu.fenced, 50) / percentile(cpu.raw, 50),
        }
      : {}),
    notes: `jobs/s, median of ${ROUNDS} interleaved rounds; cpu = this process`,
  });
  return [row('raw'), row('fenced')];
}

/** Runs `once` on `WORKERS` loops until `n` jobs were worked; the ms it took. */
async function drain(n: number, once: () => Promise<boolean>): Promise<number> {
  let done = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (done < n) {
        if (await once()) done++;
      }
    }),
  );
  return performance.now() - start;
}

const unique = (label: string) => `bench_${label}_${process.pid}_${randomBytes(3).toString('hex')}`;

async function dropSchemas(...schemas: string[]): Promise<void> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    for (const s of schemas) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  } finally {
    await c.end();
  }
}

async function pgBossArms(handlerMs: number): Promise<QueueArms> {
  const bossSchema = unique('jobs_boss');
  const schema = unique('jobs_lh');
  const boss = new PgBoss({ connectionString: PG_URL, schema: bossSchema, supervise: false });
  boss.on('error', () => undefined);
  await boss.start();
  const queue = 'bench';
  await boss.createQueue(queue, { expireInSeconds: 60, retryLimit: 0 });
  const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 8 });
  const client = new LeaseClient({ store });
  const fence = new PostgresFence({ connectionString: PG_URL, schema, maxConnections: 8 });
  const worker = new PgBossFencedWorker({
    boss,
    queue,
    client,
    fence,
    handler: () => work(handlerMs),
  });
  const enqueue = (n: number) =>
    boss.insert(
      queue,
      Array.from({ length: n }, (_, i) => ({ data: { i } })),
    );
  return {
    name: `pg-boss 12, handler ${handlerMs} ms`,
    raw: async (n) => {
      await enqueue(n);
      return drain(n, async () => {
        const [job] = await boss.fetch(queue, { batchSize: 1 });
        if (job === undefined) return false;
        await work(handlerMs);
        await boss.complete(queue, { id: job.id, retryCount: job.retryCount }, null);
        return true;
      });
    },
    fenced: async (n) => {
      await enqueue(n);
      return drain(n, async () => (await worker.runOnce())?.status === 'completed');
    },
    async close() {
      await client.close();
      await fence.close();
      await store.close();
      await boss.stop({ graceful: false });
      await dropSchemas(bossSchema, schema);
    },
  };
}

async function bullMqArms(handlerMs: number): Promise<QueueArms> {
  const prefix = unique('jobs');
  const url = new URL(REDIS_URL);
  const connection = { host: url.hostname, port: Number(url.port || 6379) };
  const queue = new Queue('bench', { connection, prefix });
  const bull = new Worker('bench', null, { connection, prefix, lockDuration: 30_000 });
  bull.on('error', () => undefined);
  await queue.waitUntilReady();
  const redis = new Redis(REDIS_URL);
  const store = new RedisLeaseStore({ redis, prefix: `${prefix}:lease:` });
  const client = new LeaseClient({ store });
  const fence = new RedisFence({ redis, prefix: `${prefix}:fence:` });
  const worker = new BullMqFencedWorker({
    worker: bull,
    queue: 'bench',
    client,
    fence,
    handler: () => work(handlerMs),
  });
  const enqueue = (n: number) =>
    queue.addBulk(
      Array.from({ length: n }, (_, i) => ({
        name: 'job',
        data: { i },
        opts: { removeOnComplete: true },
      })),
    );
  return {
    name: `BullMQ 6, handler ${handlerMs} ms`,
    raw: async (n) => {
      await enqueue(n);
      return drain(n, async () => {
        const lock = randomUUID();
        const job = await bull.getNextJob(lock, { block: false });
        if (job === undefined) return false;
        await work(handlerMs);
        await job.moveToCompleted(null, lock, false);
        return true;
      });
    },
    fenced: async (n) => {
      await enqueue(n);
      return drain(n, async () => (await worker.runOnce())?.status === 'completed');
    },
    async close() {
      await client.close();
      await store.close();
      await bull.close(true);
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
        cursor = next;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== '0');
      redis.disconnect();
    },
  };
}

async function graphileArms(handlerMs: number): Promise<QueueArms> {
  const workerSchema = unique('jobs_gw');
  const schema = unique('jobs_gwlh');
  const logger = new Logger(() => () => undefined);
  await runMigrations({ connectionString: PG_URL, schema: workerSchema, logger });
  const utils = await makeWorkerUtils({ connectionString: PG_URL, schema: workerSchema, logger });
  const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 8 });
  const client = new LeaseClient({ store });
  const fence = new PostgresFence({ connectionString: PG_URL, schema, maxConnections: 8 });
  const fenced = fencedTask({
    queue: 'bench_fenced',
    client,
    fence,
    workerSchema,
    handler: () => work(handlerMs),
  });
  // graphile-worker runs its own loop: a runner per round, stopped once `n` jobs completed.
  const drainTask = async (task: string, n: number, body: Task): Promise<number> => {
    await utils.addJobs(
      Array.from({ length: n }, (_, i) => ({ identifier: task, payload: { i } })),
    );
    let done = 0;
    let finished: () => void = () => undefined;
    const all = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const events = new EventEmitter();
    events.on('job:complete', () => {
      if (++done === n) finished();
    });
    const start = performance.now();
    const runner = await run({
      connectionString: PG_URL,
      schema: workerSchema,
      concurrency: WORKERS,
      pollInterval: 100,
      noHandleSignals: true,
      logger,
      events,
      taskList: { [task]: body },
    });
    await all;
    const ms = performance.now() - start;
    await runner.stop();
    return ms;
  };
  return {
    name: `graphile-worker 0.18, handler ${handlerMs} ms`,
    raw: (n) => drainTask('bench_raw', n, () => work(handlerMs)),
    fenced: (n) => drainTask('bench_fenced', n, fenced),
    async close() {
      await client.close();
      await fence.close();
      await store.close();
      await utils.release();
      await dropSchemas(workerSchema, schema);
    },
  };
}
