import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { AttemptResult } from '../../src/jobs/attempt-result.js';
import { BullMqFencedWorker } from '../../src/jobs/bullmq.js';
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
});
