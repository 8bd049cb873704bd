import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { REDIS, startBullMqEnv, type BullMqEnv } from './bullmq-env.js';
import { pauseArms, type PauseQueue } from './pause-story.js';

// pause-story.ts on BullMQ: the job's lock lasts 1 s, the stalled-job check runs every 300 ms
// in the test process. Control arm: BullMQ alone, as its own worker does (moveToCompleted with
// the attempt's lock token).

describe('BullMQ: a worker paused past its lock, real processes', () => {
  let env: BullMqEnv;
  let redis: Redis;
  before(async () => {
    env = await startBullMqEnv('jobs_bullp');
    redis = new Redis(REDIS);
  });
  after(async () => {
    redis?.disconnect();
    await env?.close();
  });

  it(
    "fenced: A's late write and completion are refused and B's result stands; control: A's write lands",
    { timeout: 30 * 60_000 },
    async () => {
      const q: PauseQueue = {
        keepsOutput: true,
        worker: new URL('./bullmq-worker.js', import.meta.url),
        config: { prefix: env.prefix, queueName: env.queueName },
        send: async (run) => {
          const job = await env.queue.add('job', { run }, { attempts: 5 });
          assert.ok(job.id !== undefined);
          return job.id;
        },
        read: async (id) => {
          const job = await env.queue.getJob(id);
          const value = await redis.get(`${env.prefix}:result:${id}`);
          return {
            value: value ?? undefined,
            finished: (await job?.isCompleted()) === true,
            output: job?.returnvalue,
          };
        },
      };
      await pauseArms(q, 'BullMQ');
    },
  );
});
