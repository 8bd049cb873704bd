import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { AttemptResult } from '../../src/jobs/attempt-result.js';
import { BullMqFencedWorker } from '../../src/jobs/bullmq.js';
import { Gate } from '../support/barrier.js';
import { bullParts, startBullMqEnv, type BullMqEnv } from './bullmq-env.js';

// BullMQ with the adapter in one process: a job completes through the fence and BullMQ's lock
// check; and BullMQ's deadline (the job's lock) ends an attempt whose lease is still live.

describe('BullMQ fenced attempts (one process)', () => {
  let env: BullMqEnv;
  let parts: ReturnType<typeof bullParts>;
  before(async () => {
    env = await startBullMqEnv('jobs_bull');
    parts = bullParts(env.prefix, env.queueName);
  });
  after(async () => {
    await parts?.close();
    await env?.close();
  });

  async function nextAttempt(worker: BullMqFencedWorker, ms = 20_000): Promise<AttemptResult> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const r = await worker.runOnce();
      if (r !== undefined) return r;
      await delay(50);
    }
    throw new Error(`no job within ${ms}ms`);
  }

  it('completes a job: the token is claimed on the job scope and BullMQ records the return value', async () => {
    const job = await env.queue.add('job', { n: 1 });
    let seen = 0n;
    const worker = new BullMqFencedWorker({
      worker: parts.worker,
      queue: env.queueName,
      client: parts.client,
      fence: parts.fence,
      handler: async ({ token, scope }) => {
        seen = token;
        const w = await parts.fence.set(scope, token, parts.resultKey(job.id!), 'only');
        assert.equal(w.status, 'applied');
        return { by: 'only' };
      },
    });
    const r = await nextAttempt(worker);
    assert.equal(r.status, 'completed');
    const after = await env.queue.getJob(job.id!);
    assert.equal(await after?.isCompleted(), true);
    assert.deepEqual(after?.returnvalue, { by: 'only' });
    assert.equal(await parts.fence.highWaterMark(`jobs/${env.queueName}/${job.id}`), seen);
    assert.equal(parts.client.heldLeases().length, 0);
  });

  it("the queue's deadline wins when its lock is gone first: the signal fires, the lease is freed, the late report is refused", async () => {
    const job = await env.queue.add('job', { n: 2 }, { attempts: 3 });
    let reason: unknown;
    let heldWhenAborted = -1;
    const worker = new BullMqFencedWorker({
      worker: parts.worker,
      queue: env.queueName,
      client: parts.client,
      fence: parts.fence,
      ttl: '30s', // cut to the lock's 1 s
      handler: async ({ signal }) => {
        // The lock vanishes as when it expires: the next extension finds it gone.
        await parts.redis.del(`${env.prefix}:${env.queueName}:${job.id}:lock`);
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        reason = signal.reason;
        // The lease release runs on the abort; give it its round trip before looking.
        for (let i = 0; i < 100 && parts.client.heldLeases().length > 0; i++) await delay(20);
        heldWhenAborted = parts.client.heldLeases().length;
        return { by: 'late' };
      },
    });
    const r = await nextAttempt(worker);
    assert.equal(reason, 'queue_took_back');
    assert.equal(heldWhenAborted, 0, 'the lease is released when the queue takes the job back');
    assert.equal(r.status, 'not_active');
    const after = await env.queue.getJob(job.id!);
    assert.notDeepEqual(after?.returnvalue, { by: 'late' });
  });

  it("the lease's deadline wins when the lease is lost first: lease_lost, fenced out and handed back while BullMQ's lock was still held", async () => {
    const b = bullParts(env.prefix, env.queueName);
    try {
      const job = await env.queue.add('job', { n: 3 }, { attempts: 3 });
      const aDone = new Gate();
      const bDone = new Gate();
      let aToken = 0n;
      let aReason: unknown;
      let lockAtRevoke: string | null = null;
      let markBeforeB = 0n;
      let aWrite = '';
      let bRanOurs = false;
      const workerA = new BullMqFencedWorker({
        worker: parts.worker,
        queue: env.queueName,
        client: parts.client,
        fence: parts.fence,
        handler: async ({ token, scope, signal }) => {
          aToken = token;
          lockAtRevoke = await parts.redis.get(`${env.prefix}:${env.queueName}:${job.id}:lock`);
          // An operator revokes the attempt's lease, as a release leaves the record (the token
          // field stays); its next renewal finds it gone.
          await parts.redis.hdel(`${env.prefix}:lease:{${scope}}:lease`, 'id', 'v');
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          aReason = signal.reason;
          for (let i = 0; i < 200 && markBeforeB <= token; i++) {
            markBeforeB = (await parts.fence.highWaterMark(scope)) ?? 0n;
            if (markBeforeB <= token) await delay(20);
          }
          aWrite = (await parts.fence.set(scope, token, parts.resultKey(job.id!), 'A')).status;
          aDone.open();
          await bDone.promise;
          return { by: 'A' };
        },
      });
      const workerB = new BullMqFencedWorker({
        worker: b.worker,
        queue: env.queueName,
        client: b.client,
        fence: b.fence,
        handler: async ({ job: taken, token, scope }) => {
          // The queue may hand B an earlier test's retried job first: completed and passed over.
          if (taken.id !== job.id) return { other: true };
          bRanOurs = true;
          const w = await b.fence.set(scope, token, b.resultKey(job.id!), 'B');
          assert.equal(w.status, 'applied');
          return { by: 'B' };
        },
      });
      const aRun = nextAttempt(workerA);
      await aDone.promise;
      assert.notEqual(lockAtRevoke, null, "BullMQ's lock was held when the lease was revoked");
      assert.equal(aReason, 'lease_lost');
      assert.ok(markBeforeB > aToken, 'the scope was claimed past the lost token before B ran');
      assert.equal(aWrite, 'stale_fence');
      let bResult = await nextAttempt(workerB);
      while (!bRanOurs) bResult = await nextAttempt(workerB);
      bDone.open();
      const aResult = await aRun;
      assert.equal(bResult.status, 'completed');
      assert.equal(aResult.status, 'stale_attempt');
      const after = await env.queue.getJob(job.id!);
      assert.equal(await after?.isCompleted(), true);
      assert.deepEqual(after?.returnvalue, { by: 'B' });
      assert.equal(await parts.redis.get(parts.resultKey(job.id!)), 'B');
    } finally {
      await b.close();
    }
  });
});
