import assert from 'node:assert/strict';
import { CHAOS } from '../support/fault-env.js';
import { WorkerProcess, type WorkerEvent } from './worker-process.js';

// Issue 44, part 1, with real worker processes, for any queue: worker A takes a job and is
// SIGSTOPped inside its handler; the queue takes the job back (its timeout or lock passes) and
// hands it to worker B, which writes its result and completes; A is resumed (SIGCONT) and
// writes and completes. Fenced arm: A's write and completion are refused, the result is B's.
// Control arm (the queue alone): A's write lands over B's.

const STEP_MS = 60_000;

/** Runs per arm: one in `npm test`, 20 under LEASEHOLD_CHAOS=1. */
const RUNS = CHAOS ? 20 : 1;

/** What one queue's pause test supplies. */
export interface PauseQueue {
  /** The worker process script. */
  readonly worker: URL;
  /** The worker config besides `name`, `fenced` and `hold`. */
  readonly config: object;
  /** Enqueues one job; its id. */
  send(run: number): Promise<string>;
  /** The job's result as its data says (`value`), and as the queue recorded it. */
  read(jobId: string): Promise<{ value: string | undefined; finished: boolean; output: unknown }>;
  /** Whether the queue keeps a job's output (graphile-worker deletes a completed job). */
  readonly keepsOutput: boolean;
  /**
   * Makes the queue take the job back from the stopped worker A, when the queue would not by
   * itself within the test (graphile-worker: after 4 hours). Defaults to nothing.
   */
  takeBack?(aStarted: WorkerEvent): Promise<void>;
}

/** Figures of one arm. */
export interface PauseTally {
  runs: number;
  jobs: number;
  attempts: number;
  staleWrites: number;
  staleWritesRejected: number;
  staleWritesAccepted: number;
  staleReports: number;
  staleReportsRefused: number;
  anomalies: number;
}

export const pauseTally = (): PauseTally => ({
  runs: 0,
  jobs: 0,
  attempts: 0,
  staleWrites: 0,
  staleWritesRejected: 0,
  staleWritesAccepted: 0,
  staleReports: 0,
  staleReportsRefused: 0,
  anomalies: 0,
});

/** One run of one arm; asserts the fenced arm's outcome and counts both arms'. */
export async function pauseRun(q: PauseQueue, fenced: boolean, t: PauseTally): Promise<void> {
  const id = await q.send(t.runs);
  const base = { ...q.config, fenced };
  const a = new WorkerProcess(q.worker, { ...base, name: 'A', hold: true });
  const b = new WorkerProcess(q.worker, { ...base, name: 'B', hold: false });
  try {
    await a.next((e) => e.ev === 'ready', STEP_MS, 'ready');
    await b.next((e) => e.ev === 'ready', STEP_MS, 'ready');
    a.send({ cmd: 'take' });
    const aStart = await a.next((e) => e.ev === 'started', STEP_MS, 'start');
    assert.equal(aStart.jobId, id);
    a.stop();
    await q.takeBack?.(aStart);
    // Delivered when A resumes: A's handler goes on to its write and report only then.
    a.send({ cmd: 'proceed' });
    b.send({ cmd: 'take' });
    const bDone = await b.next((e) => e.ev === 'done', STEP_MS, 'done');
    assert.equal(bDone.jobId, id);
    assert.equal(bDone.status, 'completed', `B: ${JSON.stringify(b.events)}`);
    a.cont();
    const aDone = await a.next((e) => e.ev === 'done', STEP_MS, 'done');
    const aWrite = a.events.find((e) => e.ev === 'write');
    const r = await q.read(id);
    const where = `${fenced ? 'fenced' : 'control'} run ${t.runs}: A ${JSON.stringify(a.events)} B ${JSON.stringify(b.events)} read ${JSON.stringify(r)}`;
    t.runs++;
    t.jobs++;
    t.attempts += 2;
    t.staleWrites++;
    t.staleReports++;
    if (aWrite?.status === 'stale_fence') t.staleWritesRejected++;
    if (r.value === 'A') t.staleWritesAccepted++;
    if (aDone.status === 'stale_attempt' || aDone.status === 'not_active') t.staleReportsRefused++;
    const outputIsB = !q.keepsOutput || JSON.stringify(r.output) === '{"by":"B"}';
    if (r.value !== 'B' || !outputIsB) t.anomalies++;
    assert.ok(r.finished, where);
    if (fenced) {
      assert.equal(aWrite?.status, 'stale_fence', where);
      assert.equal(aDone.status, 'stale_attempt', where);
      assert.ok(BigInt(bDone.token!) > BigInt(aStart.token!), where);
      assert.equal(r.value, 'B', where);
      if (q.keepsOutput) assert.deepEqual(r.output, { by: 'B' }, where);
    }
  } finally {
    await a.kill();
    await b.kill();
  }
}

/**
 * Both arms, alternating, {@link RUNS} times each: prints both tallies under `label` and asserts
 * the fenced arm accepted no stale write and always kept B's result, and the control arm showed
 * the anomaly in at least 90% of its runs.
 */
export async function pauseArms(q: PauseQueue, label: string): Promise<void> {
  const fenced = pauseTally();
  const control = pauseTally();
  for (let i = 0; i < RUNS; i++) {
    await pauseRun(q, true, fenced);
    await pauseRun(q, false, control);
  }
  process.stdout.write(
    `# ${label} pause: fenced ${JSON.stringify(fenced)}\n# ${label} pause: control ${JSON.stringify(control)}\n`,
  );
  assert.equal(fenced.staleWritesAccepted, 0);
  assert.equal(fenced.anomalies, 0);
  assert.ok(
    control.anomalies >= Math.ceil(0.9 * control.runs),
    `control showed the anomaly in ${control.anomalies}/${control.runs} runs`,
  );
}
