// One graphile-worker process for the real-process job tests (graphile-pause.test.ts). Same
// protocol as pg-boss-worker.ts; `started` also carries the job's lock holder (`lockedBy`).
import pg from 'pg';
import { run, type Runner, type Task } from 'graphile-worker';
import { fencedTask } from '../../src/jobs/graphile-worker.js';
import { leaseParts, resultUpsert } from './pg-boss-env.js';
import { quietLogger } from './graphile-env.js';

export interface GraphileWorkerConfig {
  readonly url: string;
  readonly workerSchema: string;
  readonly schema: string;
  readonly task: string;
  readonly name: string;
  readonly fenced: boolean;
  readonly hold: boolean;
}

const config = JSON.parse(process.argv[2]!) as GraphileWorkerConfig;
const send = (m: Record<string, unknown>) => process.send?.(m);

let proceed: () => void = () => undefined;
const proceeded = config.hold
  ? new Promise<void>((resolve) => {
      proceed = resolve;
    })
  : Promise.resolve();

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
  handler: async ({ job, token, scope }) => {
    send({
      ev: 'started',
      jobId: job.job.id,
      token: token.toString(),
      lockedBy: job.job.locked_by,
    });
    await proceeded;
    const w = await parts.fence.write({ scope, token }, (tx) =>
      tx.query(upsert, [job.job.id, config.name, token.toString()]),
    );
    send({ ev: 'write', jobId: job.job.id, status: w.status });
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

/** graphile-worker alone: a task with the same write. */
const bare: Task = async (_payload, helpers) => {
  const id = helpers.job.id;
  send({
    ev: 'started',
    jobId: id,
    token: String(helpers.job.attempts),
    lockedBy: helpers.job.locked_by,
  });
  await proceeded;
  await pool.query(upsert, [id, config.name, null]);
  send({ ev: 'write', jobId: id, status: 'applied' });
  // graphile-worker completes the job after this returns, by id alone.
  send({ ev: 'done', jobId: id, status: 'completed' });
};

let runner: Runner | undefined;
process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'proceed') proceed();
  if ((m.cmd === 'take' || m.cmd === 'work') && runner === undefined) {
    void run({
      connectionString: config.url,
      schema: config.workerSchema,
      concurrency: 1,
      pollInterval: 100,
      noHandleSignals: true,
      logger: quietLogger(),
      taskList: { [config.task]: config.fenced ? fenced : bare },
    }).then((r) => {
      runner = r;
    });
  }
});
send({ ev: 'ready' });
