// One pg-boss worker process for the real-process job tests (pg-boss-pause.test.ts and the
// soak). Started by fork() with a JSON config as argv[2]; talks to the test over IPC.
//   test → worker: { cmd: 'take' }     fetch until one job is fetched, run its attempt
//                  { cmd: 'proceed' }  let a held handler go on to its write and report
//                  { cmd: 'work' }     run attempts until stopped (the soak)
//   worker → test: { ev: 'ready' }, { ev: 'started', jobId, token }, { ev: 'write', status },
//                  { ev: 'done', jobId, status, token?, affected? }
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { PgBossFencedWorker } from '../../src/jobs/pg-boss.js';
import { bossOptions, leaseParts, resultUpsert } from './pg-boss-env.js';

export interface PgBossWorkerConfig {
  readonly url: string;
  readonly bossSchema: string;
  readonly schema: string;
  readonly queue: string;
  readonly name: string;
  /** With the adapter (fenced) or pg-boss alone. */
  readonly fenced: boolean;
  /** Hold each handler after it starts until the test says `proceed`. */
  readonly hold: boolean;
  /** The soak: the output also names the attempt's token. */
  readonly soak?: boolean;
}

const config = JSON.parse(process.argv[2]!) as PgBossWorkerConfig;
const send = (m: Record<string, unknown>) => process.send?.(m);

let proceed: () => void = () => undefined;
let proceeded = Promise.resolve();
const armHold = () => {
  proceeded = new Promise((resolve) => {
    proceed = resolve;
  });
};

const boss = new PgBoss(bossOptions(config.url, config.bossSchema, false));
boss.on('error', () => undefined);
await boss.start();
const parts = leaseParts(config.url, config.schema);
const upsert = resultUpsert(config.schema);
const pool = new pg.Pool({ connectionString: config.url, max: 2 });

const fencedWorker = new PgBossFencedWorker<unknown, unknown>({
  boss,
  queue: config.queue,
  client: parts.client,
  fence: parts.fence,
  pollInterval: '100ms',
  handler: async ({ job, token, scope }) => {
    send({ ev: 'started', jobId: job.id, token: token.toString() });
    await proceeded;
    // The soak's job takes a while, so that pauses and kills land inside handlers.
    if (config.soak) await delay(100 + Math.random() * 600);
    const w = await parts.fence.write({ scope, token }, (tx) =>
      tx.query(upsert, [job.id, config.name, token.toString()]),
    );
    send({ ev: 'write', jobId: job.id, status: w.status });
    return config.soak ? { by: config.name, token: token.toString() } : { by: config.name };
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

/** pg-boss alone: what `work()` does for one job, with the same write. */
async function bareOnce(): Promise<boolean> {
  const [job] = await boss.fetch(config.queue, { batchSize: 1 });
  if (job === undefined) return false;
  send({ ev: 'started', jobId: job.id, token: String(job.retryCount) });
  await proceeded;
  await pool.query(upsert, [job.id, config.name, null]);
  send({ ev: 'write', jobId: job.id, status: 'applied' });
  const r = (await boss.complete(config.queue, job, { by: config.name })) as { affected: number };
  send({
    ev: 'done',
    jobId: job.id,
    status: r.affected > 0 ? 'completed' : 'not_active',
    affected: r.affected,
  });
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
      // Until the queue hands this worker a job: after its expiry sweep, for a retried one.
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
