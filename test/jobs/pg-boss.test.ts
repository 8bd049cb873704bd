import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { AttemptResult } from '../../src/jobs/attempt-result.js';
import { PgBossFencedWorker, type PgBossLike } from '../../src/jobs/pg-boss.js';
import { Gate } from '../support/barrier.js';
import { withPgClient } from '../support/postgres.js';
import {
  jobRow,
  leaseParts,
  resultRow,
  resultUpsert,
  startPgBossEnv,
  type PgBossEnv,
} from './pg-boss-env.js';

// Two workers in one process, each with its own lease client and fence (as two processes
// would have); the queue's expiry sweep runs every second in the test's own PgBoss.

describe('pg-boss fenced attempts (one process)', () => {
  let env: PgBossEnv;
  let a: ReturnType<typeof leaseParts>;
  let b: ReturnType<typeof leaseParts>;
  /** A queue whose own deadline (60 s) no attempt here meets, even on a loaded machine. */
  let long: string;
  before(async () => {
    env = await startPgBossEnv('jobs_pgb', 1);
    a = leaseParts(env.url, env.schema);
    b = leaseParts(env.url, env.schema);
    long = `${env.queue}_long`;
    await env.boss.createQueue(long, { expireInSeconds: 60, retryLimit: 5, retryDelay: 0 });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await env?.close();
  });

  /** Runs `worker` until it has run an attempt, for at most `ms`. */
  async function nextAttempt(
    worker: PgBossFencedWorker<{ n: number }, unknown>,
    ms = 20_000,
  ): Promise<AttemptResult> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const r = await worker.runOnce();
      if (r !== undefined) return r;
      // Waiting for the queue's sweep to hand the job out again, not for a race.
      await delay(100);
    }
    throw new Error(`no job within ${ms}ms`);
  }

  /** Worker B: writes 'B' with its token through its fence (asserting it applied), completes. */
  function writerB(queue: string): PgBossFencedWorker<{ n: number }, unknown> {
    return new PgBossFencedWorker<{ n: number }, unknown>({
      boss: env.boss,
      queue,
      client: b.client,
      fence: b.fence,
      handler: async ({ job, token, scope }) => {
        const w = await b.fence.write({ scope, token }, (tx) =>
          tx.query(resultUpsert(env.schema), [job.id, 'B', token.toString()]),
        );
        assert.equal(w.status, 'applied');
        return { by: 'B' };
      },
    });
  }

  it('runs an attempt under a lease on the job scope and records its output with the fence check', async () => {
    const id = await env.boss.send(long, { n: 1 });
    assert.ok(id !== null);
    let seenToken = 0n;
    const worker = new PgBossFencedWorker<{ n: number }, unknown>({
      boss: env.boss,
      queue: long,
      client: a.client,
      fence: a.fence,
      handler: async ({ job, token, scope }) => {
        seenToken = token;
        assert.equal(scope, `jobs/${long}/${job.id}`);
        const w = await a.fence.write({ scope, token }, (tx) =>
          tx.query(resultUpsert(env.schema), [job.id, 'only', token.toString()]),
        );
        assert.equal(w.status, 'applied');
        return { by: 'only' };
      },
    });
    const r = await nextAttempt(worker);
    assert.equal(r.status, 'completed');
    assert.ok(seenToken > 0n);
    const row = await jobRow(env, id);
    assert.equal(row?.state, 'completed');
    assert.deepEqual(row?.output, { by: 'only' });
    assert.equal(await a.fence.highWaterMark(`jobs/${long}/${id}`), seenToken);
    assert.equal(a.client.heldLeases().length, 0, 'the attempt lease is released');
  });

  for (const late of ['complete', 'fail'] as const) {
    it(`the queue's deadline ends the attempt first; the late attempt's write and ${late} are refused and the newer attempt's result stands`, async () => {
      const id = await env.boss.send(env.queue, { n: 2 });
      assert.ok(id !== null);
      const aStarted = new Gate();
      const bDone = new Gate();
      let aReason: unknown;
      let aWrite = '';
      const workerA = new PgBossFencedWorker<{ n: number }, unknown>({
        boss: env.boss,
        queue: env.queue,
        client: a.client,
        fence: a.fence,
        ttl: '30s',
        handler: async ({ job, token, scope, signal }) => {
          aStarted.open();
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          aReason = signal.reason;
          await bDone.promise;
          // A side effect that ignores the signal: the fence refuses it.
          const w = await a.fence.write({ scope, token }, (tx) =>
            tx.query(resultUpsert(env.schema), [job.id, 'A', token.toString()]),
          );
          aWrite = w.status;
          if (late === 'fail') throw new Error('A gives up');
          return { by: 'A' };
        },
      });
      const workerB = writerB(env.queue);
      const aRun = nextAttempt(workerA);
      await aStarted.promise;
      // The job's 1 s run-time limit passes; the sweep retries it; B takes it and completes.
      const bResult = await nextAttempt(workerB);
      bDone.open();
      const aResult = await aRun;
      assert.equal(aReason, 'queue_took_back');
      assert.equal(bResult.status, 'completed');
      assert.equal(aWrite, 'stale_fence');
      assert.equal(aResult.status, 'stale_attempt');
      if (aResult.status === 'stale_attempt' && bResult.status === 'completed') {
        assert.equal(aResult.report, late);
        assert.ok(bResult.token > aResult.token);
        assert.equal(aResult.highWaterMark, bResult.token);
      }
      const row = await jobRow(env, id);
      assert.equal(row?.state, 'completed');
      assert.deepEqual(row?.output, { by: 'B' });
      assert.equal((await resultRow(env.schema, id))?.value, 'B');
    });
  }

  it("the lease's deadline wins when the lease is lost first: the signal says lease_lost, the attempt is fenced out and handed back, its write and completion are refused", async () => {
    // The queue's own deadline is far away: only the lease can end the attempt here.
    const queue = long;
    const id = await env.boss.send(queue, { n: 5 });
    assert.ok(id !== null);
    const aAborted = new Gate();
    const bDone = new Gate();
    let aToken = 0n;
    let aReason: unknown;
    let stateAtRevoke: string | undefined;
    let markBeforeB = 0n;
    let aWrite = '';
    const workerA = new PgBossFencedWorker<{ n: number }, unknown>({
      boss: env.boss,
      queue,
      client: a.client,
      fence: a.fence,
      ttl: '3s',
      handler: async ({ job, token, scope, signal }) => {
        aToken = token;
        stateAtRevoke = (await jobRow(env, job.id))?.state;
        // An operator revokes the attempt's lease in the store (as a release would leave the row);
        // its next renewal finds it gone.
        await withPgClient((c) =>
          c.query(
            `UPDATE "${env.schema}".coordination_lease SET owner_id = NULL, lease_until = '-infinity' WHERE resource_key = $1`,
            [scope],
          ),
        );
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        aReason = signal.reason;
        // Fenced out before any newer attempt exists: the scope's mark passes A's token.
        for (let i = 0; i < 200 && markBeforeB <= token; i++) {
          markBeforeB = (await a.fence.highWaterMark(scope)) ?? 0n;
          if (markBeforeB <= token) await delay(20);
        }
        const w = await a.fence.write({ scope, token }, (tx) =>
          tx.query(resultUpsert(env.schema), [job.id, 'A', token.toString()]),
        );
        aWrite = w.status;
        aAborted.open();
        await bDone.promise;
        return { by: 'A' };
      },
    });
    const workerB = writerB(queue);
    const aRun = nextAttempt(workerA);
    await aAborted.promise;
    assert.equal(stateAtRevoke, 'active');
    assert.equal(aReason, 'lease_lost');
    assert.ok(markBeforeB > aToken, 'the scope was claimed past the lost token before B ran');
    assert.equal(aWrite, 'stale_fence');
    // Handed back as failed at the loss, so the queue retries it now, not after 60 s.
    const bResult = await nextAttempt(workerB);
    bDone.open();
    const aResult = await aRun;
    assert.equal(bResult.status, 'completed');
    assert.equal(aResult.status, 'stale_attempt');
    if (aResult.status === 'stale_attempt' && bResult.status === 'completed')
      assert.ok(bResult.token > markBeforeB && markBeforeB > aResult.token);
    const row = await jobRow(env, id);
    assert.equal(row?.state, 'completed');
    assert.deepEqual(row?.output, { by: 'B' });
    assert.equal((await resultRow(env.schema, id))?.value, 'B');
  });

  it('an attempt paused between its fetch and its lease, after a newer attempt finished, gets the higher token but does not run', async () => {
    const id = await env.boss.send(env.queue, { n: 4 });
    assert.ok(id !== null);
    const fetched = new Gate();
    const resume = new Gate();
    // A's fetch is held after pg-boss answered it: A is "paused" before asking for its lease.
    const pausedBoss: PgBossLike = {
      fetch: async (name, options) => {
        const jobs = await env.boss.fetch(name, options);
        if (jobs.length > 0) {
          fetched.open();
          await resume.promise;
        }
        return jobs;
      },
      complete: (name, attempt, data, options) => env.boss.complete(name, attempt, data, options),
      fail: (...args) => env.boss.fail(...args),
      touch: (...args) => env.boss.touch(...args),
    };
    let aRan = false;
    const workerA = new PgBossFencedWorker<{ n: number }, unknown>({
      boss: pausedBoss,
      queue: env.queue,
      client: a.client,
      fence: a.fence,
      handler: () => {
        aRan = true;
        return { by: 'A' };
      },
    });
    const workerB = writerB(env.queue);
    const aRun = workerA.runOnce();
    await fetched.promise;
    const bResult = await nextAttempt(workerB);
    assert.equal(bResult.status, 'completed');
    resume.open();
    const aResult = await aRun;
    assert.equal(aRan, false, "A's handler did not run");
    assert.equal(aResult?.status, 'not_active');
    if (aResult?.status === 'not_active' && bResult.status === 'completed') {
      assert.equal(aResult.report, 'start');
      assert.ok(aResult.token > bResult.token, 'the lease gave A the higher token');
      assert.equal(await a.fence.highWaterMark(`jobs/${env.queue}/${id}`), bResult.token);
    }
    assert.deepEqual((await jobRow(env, id))?.output, { by: 'B' });
    assert.equal((await resultRow(env.schema, id))?.value, 'B');
  });

  it('a handler that throws fails the attempt at the queue, fenced, and the job is retried', async () => {
    const id = await env.boss.send(env.queue, { n: 3 });
    assert.ok(id !== null);
    const worker = new PgBossFencedWorker<{ n: number }, unknown>({
      boss: env.boss,
      queue: env.queue,
      client: a.client,
      fence: a.fence,
      handler: (): never => {
        throw new Error('boom');
      },
    });
    const r = await nextAttempt(worker);
    assert.equal(r.status, 'failed');
    const row = await jobRow(env, id);
    assert.equal(row?.state, 'retry');
  });

  it('rejects a bad queue name and a bad concurrency at once', () => {
    const base = { boss: env.boss, client: a.client, fence: a.fence, handler: () => 1 };
    assert.throws(() => new PgBossFencedWorker({ ...base, queue: '' }), {
      code: 'ERR_INVALID_ARGUMENT',
    });
    assert.throws(() => new PgBossFencedWorker({ ...base, queue: 'q', concurrency: 0 }), {
      code: 'ERR_INVALID_ARGUMENT',
    });
  });
});
