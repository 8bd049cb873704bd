import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { REDIS, startBullMqEnv, type BullMqEnv } from './bullmq-env.js';
import { SOAK_SIZE, soak, type SoakQueue } from './soak-story.js';

// soak-story.ts on BullMQ: the job's lock lasts 1 s, the stalled-job check runs every 300 ms in
// the test process; the result and its log entry are written in one fenced step, and BullMQ
// keeps the completing attempt's return value (its token). Bounded: `npm test` runs 150 jobs
// with faults for 10 s, chaos 1,000 jobs for 60 s.

describe('BullMQ soak: 8 fenced workers, random SIGSTOP and SIGKILL', () => {
  let env: BullMqEnv;
  let redis: Redis;
  let ids: string[] = [];
  before(async () => {
    env = await startBullMqEnv('jobs_bulls');
    redis = new Redis(REDIS);
  });
  after(async () => {
    redis?.disconnect();
    await env?.close();
  });

  it(
    'applies every job once by its highest-token attempt, accepts no stale write, loses no job',
    { timeout: 30 * 60_000 },
    async () => {
      const q: SoakQueue = {
        label: 'BullMQ',
        worker: new URL('./bullmq-worker.js', import.meta.url),
        config: { prefix: env.prefix, queueName: env.queueName },
        ...SOAK_SIZE,
        settleMs: 180_000,
        keepsOutput: true,
        enqueue: async (n) => {
          const jobs = await env.queue.addBulk(
            Array.from({ length: n }, (_, i) => ({
              name: 'job',
              data: { n: i },
              opts: { attempts: 100 },
            })),
          );
          ids = jobs.map((j) => j.id!);
        },
        completed: async () => (await env.queue.getJobCounts('completed')).completed ?? 0,
        writes: async () =>
          (await redis.lrange(`${env.prefix}:effect_log`, 0, -1)).map((entry) => {
            const [jobId, token] = entry.split(':') as [string, string];
            return { jobId, token: BigInt(token) };
          }),
        finals: () =>
          Promise.all(
            ids.map(async (jobId) => {
              const job = await env.queue.getJob(jobId);
              const out = job?.returnvalue as { token?: string } | undefined;
              const result = await redis.get(`${env.prefix}:result:${jobId}`);
              return {
                jobId,
                completedBy: out?.token === undefined ? undefined : BigInt(out.token),
                result: result === null ? undefined : BigInt(result),
                attempts: job?.attemptsStarted ?? 0,
              };
            }),
          ),
      };
      await soak(q);
    },
  );
});
