// One pg-boss worker process for the real-process job tests (pg-boss-pause.test.ts and the
// soak); the protocol is worker-side.ts's.
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { PgBossFencedWorker } from '../../src/jobs/pg-boss.js';
import { bossOptions, leaseParts, resultUpsert } from './pg-boss-env.js';
import { Hold, send, sendOutcome, serveWorker, soakWork, workerConfig } from './worker-side.js';
import type { WorkerSideConfig } from './worker-side.js';

export interface PgBossWorkerConfig extends WorkerSideConfig {
  readonly url: string;
  readonly bossSchema: string;
  readonly schema: string;
  readonly queue: string;
}

const config = workerConfig<PgBossWorkerConfig>();
const hold = new Hold(config.hold);

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
    await hold.passed();
    if (config.soak) await soakWork();
    const w = await parts.fence.write({ scope, token }, (tx) =>
      tx.query(upsert, [job.id, config.name, token.toString()]),
    );
    send({ ev: 'write', jobId: job.id, status: w.status });
    return config.soak ? { by: config.name, token: token.toString() } : { by: config.name };
  },
  onOutcome: sendOutcome,
});

/** pg-boss alone: what `work()` does for one job, with the same write. */
async function bareOnce(): Promise<boolean> {
  const [job] = await boss.fetch(config.queue, { batchSize: 1 });
  if (job === undefined) return false;
  send({ ev: 'started', jobId: job.id, token: String(job.retryCount) });
  await hold.passed();
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

serveWorker(hold, {
  once: async () => (config.fenced ? (await fencedWorker.runOnce()) !== undefined : bareOnce()),
});
