// One graphile-worker process for the real-process job tests (graphile-pause.test.ts and the
// soak); the protocol is worker-side.ts's, and `started` also carries the job's lock holder
// (`lockedBy`), and `{ ev: 'pool', poolId }` names the worker pool once it exists.
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { run, type Task, type WorkerEvents } from 'graphile-worker';
import { fencedTask } from '../../src/jobs/graphile-worker.js';
import { leaseParts, resultUpsert } from './pg-boss-env.js';
import { quietLogger } from './graphile-env.js';
import { Hold, send, sendOutcome, serveWorker, soakWork, workerConfig } from './worker-side.js';
import type { WorkerSideConfig } from './worker-side.js';

export interface GraphileWorkerConfig extends WorkerSideConfig {
  readonly url: string;
  readonly workerSchema: string;
  readonly schema: string;
  readonly task: string;
}

const config = workerConfig<GraphileWorkerConfig>();
const hold = new Hold(config.hold);

const parts = leaseParts(config.url, config.schema);
const upsert = resultUpsert(config.schema);
const pool = new pg.Pool({ connectionString: config.url, max: 2 });

const fenced: Task = fencedTask<unknown, unknown>({
  queue: config.task,
  client: parts.client,
  fence: parts.fence,
  workerSchema: config.workerSchema,
  // graphile-worker has no deadline of its own to follow: a short lease, so B need not wait.
  ttl: '1s',
  // A job taken from a stopped worker is handed out at once, while its lease may still have up
  // to 1 s to run: wait that out rather than fail the attempt (graphile-worker's retry backs
  // off for seconds).
  wait: '2s',
  handler: async ({ job, token, scope }) => {
    send({
      ev: 'started',
      jobId: job.job.id,
      token: token.toString(),
      lockedBy: job.job.locked_by,
    });
    await hold.passed();
    if (config.soak) await soakWork();
    const w = await parts.fence.write({ scope, token }, (tx) =>
      tx.query(upsert, [job.job.id, config.name, token.toString()]),
    );
    send({ ev: 'write', jobId: job.job.id, status: w.status });
    return { by: config.name };
  },
  onOutcome: sendOutcome,
});

/** graphile-worker alone: a task with the same write. */
const bare: Task = async (_payload, helpers) => {
  const id = helpers.job.id;
  send({
    ev: 'started',
    jobId: id,
    token: String(helpers.job.attempts),
    lockedBy: helpers.job.locked_by,
  });
  await hold.passed();
  await pool.query(upsert, [id, config.name, null]);
  send({ ev: 'write', jobId: id, status: 'applied' });
  // graphile-worker completes the job after this returns, by id alone.
  send({ ev: 'done', jobId: id, status: 'completed' });
};

// The worker pool's id is what graphile-worker records as a job's lock holder (`locked_by`) and
// what `forceUnlockWorkers` names: told to the test as soon as the pool exists.
const events: WorkerEvents = new EventEmitter();
events.on('pool:create', ({ workerPool }) => send({ ev: 'pool', poolId: workerPool.id }));

serveWorker(hold, {
  start: () => {
    void run({
      events,
      connectionString: config.url,
      schema: config.workerSchema,
      concurrency: 1,
      pollInterval: 100,
      noHandleSignals: true,
      logger: quietLogger(),
      taskList: { [config.task]: config.fenced ? fenced : bare },
    });
  },
});
