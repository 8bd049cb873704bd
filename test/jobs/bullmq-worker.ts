// One BullMQ worker process for the real-process job tests (bullmq-pause.test.ts and the
// soak). Same protocol as pg-boss-worker.ts.
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { BullMqFencedWorker } from '../../src/jobs/bullmq.js';
import { isLostLock } from '../../src/jobs/bullmq-client.js';
import { bullParts } from './bullmq-env.js';

export interface BullMqWorkerConfig {
  readonly prefix: string;
  readonly queueName: string;
  readonly name: string;
  readonly fenced: boolean;
  readonly hold: boolean;
  /** The soak: each job takes a while, logs its accepted write, and its output names its token. */
  readonly soak?: boolean;
}

const config = JSON.parse(process.argv[2]!) as BullMqWorkerConfig;
const send = (m: Record<string, unknown>) => process.send?.(m);

let proceed: () => void = () => undefined;
let proceeded = Promise.resolve();
const armHold = () => {
  proceeded = new Promise((resolve) => {
    proceed = resolve;
  });
};

const parts = bullParts(config.prefix, config.queueName);

const fencedWorker = new BullMqFencedWorker<unknown, unknown>({
  worker: parts.worker,
  queue: config.queueName,
  client: parts.client,
  fence: parts.fence,
  handler: async ({ job, token, scope }) => {
    send({ ev: 'started', jobId: job.id, token: token.toString() });
    await proceeded;
    if (config.soak) {
      await delay(100 + Math.random() * 600);
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
  onOutcome: (o) => {
    const r = o.result;
    send({
      ev: 'done',
      jobId: o.jobId,
      status: r.status,
      token: 'token' in r ? String(r.token) : undefined,
    });
  },
});

/** BullMQ alone: what its own worker does for one job, with the same write. */
async function bareOnce(): Promise<boolean> {
  const lock = randomUUID();
  const job = await parts.worker.getNextJob(lock, { block: false });
  if (job === undefined || job.id === undefined) return false;
  send({ ev: 'started', jobId: job.id, token: String(job.attemptsMade) });
  await proceeded;
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

async function once(): Promise<boolean> {
  if (config.hold) armHold();
  if (config.fenced) return (await fencedWorker.runOnce()) !== undefined;
  return bareOnce();
}

process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'proceed') proceed();
  if (m.cmd === 'take') {
    void (async () => {
      for (let i = 0; i < 600; i++) {
        if (await once()) return;
        await delay(50);
      }
      send({ ev: 'gave_up' });
    })();
  }
  if (m.cmd === 'work') {
    void (async () => {
      for (;;) {
        if (!(await once())) await delay(50);
      }
    })();
  }
});
send({ ev: 'ready' });
