import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CHAOS } from '../support/fault-env.js';
import { jobRow, resultRow, startPgBossEnv, type PgBossEnv } from './pg-boss-env.js';
import type { PgBossWorkerConfig } from './pg-boss-worker.js';
import { WorkerProcess } from './worker-process.js';

// Issue 44, part 1, on pg-boss with real worker processes: worker A takes a job and is
// SIGSTOPped; the queue's run-time limit (1 s) passes and its sweep hands the job to worker B,
// which writes its result and completes; A is resumed (SIGCONT) and writes and completes.
// Fenced arm: A's write and A's completion are refused, the job's result is B's. Control arm
// (pg-boss alone, as its work() does): A's write lands over B's.

const WORKER = new URL('./pg-boss-worker.js', import.meta.url);
const RUNS = CHAOS ? 20 : 2;
const STEP_MS = 60_000;

interface Tally {
  runs: number;
  attempts: number;
  staleWrites: number;
  staleWritesRejected: number;
  staleWritesAccepted: number;
  staleReports: number;
  staleReportsRefused: number;
  anomalies: number;
}

const tally = (): Tally => ({
  runs: 0,
  attempts: 0,
  staleWrites: 0,
  staleWritesRejected: 0,
  staleWritesAccepted: 0,
  staleReports: 0,
  staleReportsRefused: 0,
  anomalies: 0,
});

describe('pg-boss: a worker paused past the job timeout, real processes', () => {
  let env: PgBossEnv;
  before(async () => {
    env = await startPgBossEnv('jobs_pgbp', 1);
  });
  after(async () => {
    await env?.close();
  });

  async function oneRun(fenced: boolean, t: Tally): Promise<void> {
    const id = await env.boss.send(env.queue, { run: t.runs });
    assert.ok(id !== null);
    const base = {
      url: env.url,
      bossSchema: env.bossSchema,
      schema: env.schema,
      queue: env.queue,
      fenced,
    };
    const a = new WorkerProcess(WORKER, {
      ...base,
      name: 'A',
      hold: true,
    } satisfies PgBossWorkerConfig);
    const b = new WorkerProcess(WORKER, {
      ...base,
      name: 'B',
      hold: false,
    } satisfies PgBossWorkerConfig);
    try {
      await a.next((e) => e.ev === 'ready', STEP_MS, 'ready');
      await b.next((e) => e.ev === 'ready', STEP_MS, 'ready');
      a.send({ cmd: 'take' });
      const aStart = await a.next((e) => e.ev === 'started', STEP_MS, 'start');
      assert.equal(aStart.jobId, id);
      a.stop();
      // Delivered when A resumes: A's handler goes on to its write and report only then.
      a.send({ cmd: 'proceed' });
      b.send({ cmd: 'take' });
      const bDone = await b.next((e) => e.ev === 'done', STEP_MS, 'done');
      assert.equal(bDone.jobId, id);
      assert.equal(bDone.status, 'completed', `B: ${JSON.stringify(b.events)}`);
      a.cont();
      const aDone = await a.next((e) => e.ev === 'done', STEP_MS, 'done');
      const aWrite = a.events.find((e) => e.ev === 'write');
      const result = await resultRow(env.schema, id);
      const job = await jobRow(env, id);
      const where = `${fenced ? 'fenced' : 'control'} run ${t.runs}: A ${JSON.stringify(a.events)} B ${JSON.stringify(b.events)} result ${JSON.stringify(result)} job ${JSON.stringify(job)}`;
      t.runs++;
      t.attempts += 2;
      t.staleWrites++;
      t.staleReports++;
      if (aWrite?.status === 'stale_fence') t.staleWritesRejected++;
      if (result?.value === 'A') t.staleWritesAccepted++;
      if (aDone.status === 'stale_attempt' || aDone.status === 'not_active')
        t.staleReportsRefused++;
      const anomaly = result?.value !== 'B' || JSON.stringify(job?.output) !== '{"by":"B"}';
      if (anomaly) t.anomalies++;
      assert.equal(job?.state, 'completed', where);
      if (fenced) {
        assert.equal(aWrite?.status, 'stale_fence', where);
        assert.equal(aDone.status, 'stale_attempt', where);
        assert.ok(BigInt(bDone.token!) > BigInt(aStart.token!), where);
        assert.equal(result?.value, 'B', where);
        assert.deepEqual(job?.output, { by: 'B' }, where);
      }
    } finally {
      await a.kill();
      await b.kill();
    }
  }

  it(
    "fenced: A's late write and completion are refused and B's result stands; control: A's write lands",
    { timeout: 30 * 60_000 },
    async () => {
      const fenced = tally();
      const control = tally();
      for (let i = 0; i < RUNS; i++) {
        await oneRun(true, fenced);
        await oneRun(false, control);
      }
      process.stdout.write(
        `# pg-boss pause: fenced ${JSON.stringify(fenced)}\n# pg-boss pause: control ${JSON.stringify(control)}\n`,
      );
      assert.equal(fenced.staleWritesAccepted, 0);
      assert.equal(fenced.anomalies, 0);
      assert.ok(
        control.anomalies >= Math.ceil(0.9 * control.runs),
        `control showed the anomaly in ${control.anomalies}/${control.runs} runs`,
      );
    },
  );
});
