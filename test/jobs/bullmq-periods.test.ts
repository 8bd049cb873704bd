import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Queue, Worker, type Job } from 'bullmq';
import { LeaseClient } from '../../src/core/client.js';
import { RedisFence } from '../../src/fencing/redis.js';
import type { AttemptResult } from '../../src/jobs/attempt-result.js';
import { BullMqFencedWorker, bullMqPeriod } from '../../src/jobs/bullmq.js';
import { RedisLeaseStore } from '../../src/stores/redis/index.js';
import { LOCK_MS, REDIS, removeKeys } from './bullmq-env.js';

// One fenced run per period on BullMQ job schedulers. Two installs of one queue (two key
// prefixes: a blue/green deploy, a second region) each run `upsertJobScheduler('tick')` with
// the same cron pattern (every second): BullMQ's own guard (the job id `repeat:<id>:<millis>`) is per install, so
// each period makes two jobs. The control arm runs both with plain BullMQ workers and counts the
// runs per period; the fenced arm shares one lease store and fence between the two installs'
// workers and counts the fenced effects per period.

// A pattern, not `every`: a pattern's periods fall on the clock, the same in both installs,
// while `every` counts from each scheduler's own upsert, so two schedulers' periods differ.
const PATTERN = '* * * * * *';
const SCHEDULER = 'tick';
const QUEUE = 'q_periods';

interface Install {
  readonly queue: Queue;
  readonly prefix: string;
}

describe('BullMQ job schedulers: one fenced run per period', () => {
  const base = `lh_cron_bullp_${process.pid}_${randomBytes(4).toString('hex')}`;
  const installs: Install[] = [];
  const closers: (() => Promise<void>)[] = [];
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS);
  });
  after(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    for (const i of installs) {
      await i.queue.obliterate({ force: true }).catch(() => undefined);
      await i.queue.close();
    }
    await removeKeys(`${base}*`);
    redis.disconnect();
  });

  async function install(label: string): Promise<Install> {
    const prefix = `${base}_${label}`;
    const queue = new Queue(QUEUE, { connection: REDIS, prefix });
    installs.push({ queue, prefix });
    await queue.upsertJobScheduler(SCHEDULER, { pattern: PATTERN }, { name: 'tick', data: {} });
    return { queue, prefix };
  }

  async function until(what: string, ms: number, done: () => boolean): Promise<void> {
    const end = Date.now() + ms;
    while (!done()) {
      if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
      await delay(25);
    }
  }

  it('control arm: the two installs each run every period, so each period runs twice', async () => {
    const [a, b] = [await install('ca'), await install('cb')];
    const runs = new Map<number, number>();
    const workers = [a, b].map((i) => {
      const w = new Worker(
        QUEUE,
        async (job: Job) => {
          const start = bullMqPeriod(job)!.start;
          runs.set(start, (runs.get(start) ?? 0) + 1);
          await delay(50);
        },
        { connection: REDIS, prefix: i.prefix, lockDuration: LOCK_MS },
      );
      w.on('error', () => undefined);
      return w;
    });
    closers.push(async () => {
      for (const w of workers) await w.close(true);
    });
    await until('3 periods run twice', 10_000, () => twice(runs) >= 3);
    for (const i of [a, b]) await i.queue.removeJobScheduler(SCHEDULER);
    for (const w of workers) await w.close();
    const periods = runs.size;
    console.log(
      `# bullmq control: ${periods} periods, ${sum(runs)} runs, ${twice(runs)} periods run twice`,
    );
    assert.ok(twice(runs) >= 3);
  });

  it('fenced: one effect per period; the duplicate finds the period done, a late older run finds it passed', async () => {
    const store = new RedisLeaseStore({ redis, prefix: `${base}:lease:` });
    const client = new LeaseClient({ store });
    const fence = new RedisFence({ redis, prefix: `${base}:fence:` });
    const effects = new Map<number, string[]>();
    const results: { by: string; result: AttemptResult }[] = [];
    const fenced = (i: Install, by: string) => {
      const worker = new Worker(QUEUE, null, {
        connection: REDIS,
        prefix: i.prefix,
        lockDuration: LOCK_MS,
      });
      worker.on('error', () => undefined);
      const w = new BullMqFencedWorker({
        worker,
        queue: QUEUE,
        client,
        fence,
        pollInterval: '50ms',
        handler: async ({ job, token, scope }) => {
          const start = bullMqPeriod(job)!.start;
          // The run's effect: one fenced write per period, under the schedule's scope.
          const r = await fence.set(scope, token, `${base}:effect:${start}:${by}`, by);
          if (r.status !== 'applied') throw new Error(`effect refused: ${r.status}`);
          effects.set(start, [...(effects.get(start) ?? []), by]);
          await delay(150); // long enough for the other install's job of the period to arrive
          return { by };
        },
        onOutcome: ({ result }) => {
          results.push({ by, result });
        },
      });
      closers.push(async () => {
        await w.stop();
        await worker.close(true);
      });
      return w;
    };
    const a = await install('fa');
    const b = await install('fb');
    const wa = fenced(a, 'a');
    wa.start();
    // B's scheduler made its first job with A's, but B's worker starts only once A has
    // completed two periods: B's first run is of an older period than the latest done.
    await until('A completes 2 periods', 10_000, () => count(results, 'completed') >= 2);
    const wb = fenced(b, 'b');
    wb.start();
    await until('a period_passed and two period_done', 15_000, () => {
      return count(results, 'period_passed') >= 1 && count(results, 'period_done') >= 2;
    });
    for (const i of [a, b]) await i.queue.removeJobScheduler(SCHEDULER);
    await wa.stop();
    await wb.stop();
    const statuses = results.map((r) => r.result.status);
    console.log(
      `# bullmq fenced: ${effects.size} periods with an effect, ${sum(new Map([...effects].map(([k, v]) => [k, v.length])))} effects, ` +
        `completed ${count(results, 'completed')}, period_done ${count(results, 'period_done')}, ` +
        `period_passed ${count(results, 'period_passed')}, other ${statuses.filter((s) => !s.startsWith('period_') && s !== 'completed').join(',') || 0}`,
    );
    for (const [start, by] of effects)
      assert.equal(by.length, 1, `period ${start}: ${by.join(',')}`);
    assert.equal(count(results, 'completed'), effects.size);
    const passed = results.find((r) => r.result.status === 'period_passed')!;
    assert.equal(passed.by, 'b');
    if (passed.result.status === 'period_passed')
      assert.ok(passed.result.latestPeriod > 0n, 'names the latest period done');
    // The mark is the latest period whose run completed.
    const latest = Math.max(...effects.keys());
    assert.equal(
      await fence.highWaterMark(`jobs/${QUEUE}/schedules/${SCHEDULER}/period`),
      BigInt(latest),
    );
    await client.close();
    await store.close();
  });
});

function twice(runs: Map<number, number>): number {
  return [...runs.values()].filter((n) => n >= 2).length;
}

function sum(m: Map<number, number>): number {
  return [...m.values()].reduce((x, y) => x + y, 0);
}

function count(results: { result: AttemptResult }[], status: AttemptResult['status']): number {
  return results.filter((r) => r.result.status === status).length;
}
