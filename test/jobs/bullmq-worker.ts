// One BullMQ worker process for the real-process job tests (bullmq-pause.test.ts and the
// soak); the protocol is worker-side.ts's.
import { randomUUID } from 'node:crypto';
import { BullMqFencedWorker } from '../../src/jobs/bullmq.js';
import { isLostLock } from '../../src/jobs/bullmq-client.js';
import { bullParts } from './bullmq-env.js';
import { Hold, send, sendOutcome, serveWorker, soakWork, workerConfig } from './worker-side.js';
import type { WorkerSideConfig } from './worker-side.js';

export interface BullMqWorkerConfig extends WorkerSideConfig {
  readonly prefix: string;
  readonly queueName: string;
}

const config = workerConfig<BullMqWorkerConfig>();
const hold = new Hold(config.hold);
const parts = bullParts(config.prefix, config.queueName);

const fencedWorker = new BullMqFencedWorker<unknown, unknown>({
  worker: parts.worker,
  queue: config.queueName,
  client: parts.client,
  fence: parts.fence,
  handler: async ({ job, token, scope }) => {
    send({ ev: 'started', jobId: job.id, token: token.toString() });
    await hold.passed();
    if (config.soak) {
      await soakWork();
      // The result and its log entry in the fence's one step.
      const w = await parts.fence.commands(scope, token, [
        { command: 'SET', keys: [parts.resultKey(job.id!)], args: [token.toString()] },
        { command: 'RPUSH', keys: [`${config.prefix}:effect_log`], args: [`${job.id}:${token}`] },
      ]);
      send({ ev: 'write', jobId: job.id, status: w.status });
      return { by: config.name, token: token.toString() };
    }
    const w = await parts.fence.set(scope, token, parts.resultKey(job.id!), config.name);
    send({ ev: 'write', jobId: job.id, status: w.status });
    return { by: config.name };
  },
  onOutcome: sendOutcome,
});

/** BullMQ alone: what its own worker does for one job, with the same write. */
async function bareOnce(): Promise<boolean> {
  const lock = randomUUID();
  const job = await parts.worker.getNextJob(lock, { block: false });
  if (job === undefined || job.id === undefined) return false;
  send({ ev: 'started', jobId: job.id, token: String(job.attemptsMade) });
  await hold.passed();
  await parts.redis.set(parts.resultKey(job.id), config.name);
  send({ ev: 'write', jobId: job.id, status: 'applied' });
  let status = 'completed';
  try {
    await job.moveToCompleted({ by: config.name }, lock, false);
  } catch (err) {
    if (!isLostLock(err)) throw err;
    status = 'not_active';
  }
  send({ ev: 'done', jobId: job.id, status });
  return true;
}

serveWorker(hold, {
  once: async () => (config.fenced ? (await fencedWorker.runOnce()) !== undefined : bareOnce()),
});
