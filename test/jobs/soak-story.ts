import { CHAOS } from '../support/fault-env.js';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { WorkerProcess } from './worker-process.js';

// Issue 44, part 2, for any queue: 8 fenced worker processes work one queue while, every
// 0.3–1 s, one of them is stopped (SIGSTOP for 2.5–4 s, past the queue's deadline for the job,
// then SIGCONT) or killed (SIGKILL, then a new process). Each job writes its token and a log
// entry in one fenced step on its scope. At the end: every job completed (none lost); per job
// the accepted writes' tokens never went down (0 stale accepted); the job's result holds the
// highest accepted token; the queue's record of the completing attempt (where it keeps one)
// names that token; and no job was reported completed by two attempts, nor by one that was not
// the highest.

const WORKERS = 8;
const READY_MS = 60_000;

/** One accepted write, in commit order. */
export interface SoakWrite {
  readonly jobId: string;
  readonly token: bigint;
}

/** A job as the queue and the test's data hold it at the end. */
export interface SoakFinal {
  readonly jobId: string;
  /** The token the queue recorded as completing the job; undefined if it keeps no output. */
  readonly completedBy: bigint | undefined;
  /** The token in the job's result. */
  readonly result: bigint | undefined;
  /** Attempts the queue counted; 0 if it does not keep them (see `handlersStarted`). */
  readonly attempts: number;
}

/** What one queue's soak supplies. */
/** How much a soak does: 150 jobs under 10 s of faults in `npm test`, 1,000 under 60 s in chaos. */
export const SOAK_SIZE = Object.freeze({
  jobs: CHAOS ? 1000 : 150,
  faultMs: CHAOS ? 60_000 : 10_000,
});

export interface SoakQueue {
  /** Names the queue in the printed summary. */
  readonly label: string;
  readonly worker: URL;
  /** The worker config besides `name`, `fenced`, `hold` and `soak`. */
  readonly config: object;
  readonly jobs: number;
  /** How long faults are injected. */
  readonly faultMs: number;
  /** How long every job may then take to complete. */
  readonly settleMs: number;
  /** Whether the queue records the completing attempt's output (graphile-worker deletes it). */
  readonly keepsOutput: boolean;
  /** Waits until a process told `work` is working (e.g. has said its worker id). */
  working?(w: WorkerProcess): Promise<void>;
  /**
   * Called after a process was stopped or killed: makes the queue take back its jobs when the
   * queue would not by itself within the soak (graphile-worker: an operator's forceUnlockWorkers).
   */
  lost?(w: WorkerProcess, how: 'stopped' | 'killed'): Promise<void>;
  /** Lines describing the jobs not completed, for the failure message. */
  describeOpen?(): Promise<string>;
  enqueue(jobs: number): Promise<void>;
  /** How many jobs are completed. */
  completed(): Promise<number>;
  writes(): Promise<SoakWrite[]>;
  finals(): Promise<SoakFinal[]>;
}

/** What a soak run counted. */
export interface SoakSummary {
  jobs: number;
  attempts: number;
  /** Handlers the workers reported started (a killed process may not have told). */
  handlersStarted: number;
  acceptedWrites: number;
  staleAccepted: number;
  wrongResult: number;
  completedTwice: number;
  stops: number;
  kills: number;
}

/** Runs one soak of `q`, prints its summary and asserts it; the summary for more checks. */
export async function soak(q: SoakQueue): Promise<SoakSummary> {
  const slots: WorkerProcess[] = [];
  // Every process ever started: the killed ones' outcomes count too.
  const all: WorkerProcess[] = [];
  const start = async (i: number) => {
    const config = { ...q.config, name: `w${i}`, fenced: true, hold: false, soak: true };
    const w = new WorkerProcess(q.worker, config);
    slots[i] = w;
    all.push(w);
    await w.next((e) => e.ev === 'ready', READY_MS, 'ready');
    w.send({ cmd: 'work' });
    await q.working?.(w);
  };
  try {
    for (let i = 0; i < WORKERS; i++) await start(i);
    await q.enqueue(q.jobs);
    const { stops, kills } = await faults(q, slots, start);
    for (const w of slots) w.cont();

    const settleEnd = Date.now() + q.settleMs;
    let completed = 0;
    while (Date.now() < settleEnd) {
      completed = await q.completed();
      if (completed === q.jobs) break;
      await delay(500);
    }
    if (completed !== q.jobs) {
      const open = (await q.describeOpen?.()) ?? '';
      assert.fail(`${completed} of ${q.jobs} jobs completed\n${open}`);
    }

    const summary = tally(q, await q.writes(), await q.finals(), all, stops, kills);
    process.stdout.write(`# ${q.label} soak: ${JSON.stringify(summary)}\n`);
    assert.equal(summary.staleAccepted, 0);
    assert.equal(summary.wrongResult, 0);
    assert.equal(summary.completedTwice, 0);
    assert.ok(stops + kills > 0);
    return summary;
  } finally {
    await Promise.all(all.map((w) => w.kill()));
  }
}

async function faults(
  q: SoakQueue,
  slots: WorkerProcess[],
  start: (i: number) => Promise<void>,
): Promise<{ stops: number; kills: number }> {
  let stops = 0;
  let kills = 0;
  const faultsEnd = Date.now() + q.faultMs;
  while (Date.now() < faultsEnd) {
    await delay(300 + Math.random() * 700);
    const i = Math.floor(Math.random() * slots.length);
    const w = slots[i]!;
    if (Math.random() < 0.6) {
      stops++;
      w.stop();
      // Past the queue's deadline, so its job is handed to another worker meanwhile.
      setTimeout(() => w.cont(), 2500 + Math.random() * 1500).unref();
      await q.lost?.(w, 'stopped');
    } else {
      kills++;
      await w.kill();
      await q.lost?.(w, 'killed');
      await start(i);
    }
  }
  return { stops, kills };
}

function tally(
  q: SoakQueue,
  writes: SoakWrite[],
  finals: SoakFinal[],
  all: WorkerProcess[],
  stops: number,
  kills: number,
): SoakSummary {
  assert.equal(finals.length, q.jobs);
  const maxOf = new Map<string, bigint>();
  let staleAccepted = 0;
  for (const w of writes) {
    if (w.token < (maxOf.get(w.jobId) ?? 0n)) staleAccepted++;
    else maxOf.set(w.jobId, w.token);
  }
  // The completions the attempts themselves reported (a killed process may not have told).
  const reported = new Map<string, bigint[]>();
  let handlersStarted = 0;
  for (const w of all) {
    for (const e of w.events) {
      if (e.ev === 'started') handlersStarted++;
      if (e.ev !== 'done' || e.status !== 'completed' || e.jobId === undefined) continue;
      reported.set(e.jobId, [...(reported.get(e.jobId) ?? []), BigInt(e.token!)]);
    }
  }
  let wrongResult = 0;
  let completedTwice = 0;
  let attempts = 0;
  for (const j of finals) {
    attempts += j.attempts;
    const max = maxOf.get(j.jobId);
    const told = reported.get(j.jobId) ?? [];
    if (told.length > 1) completedTwice++;
    const wrong =
      max === undefined ||
      j.result !== max ||
      (q.keepsOutput && j.completedBy !== max) ||
      told.some((t) => t !== max);
    if (wrong) {
      wrongResult++;
      process.stdout.write(
        `# wrong: job ${j.jobId} completedBy ${j.completedBy} result ${j.result} max ${max} told ${told.join(',')} log ${writes
          .filter((w) => w.jobId === j.jobId)
          .map((w) => w.token)
          .join(',')}\n`,
      );
    }
  }
  return {
    jobs: q.jobs,
    attempts,
    handlersStarted,
    acceptedWrites: writes.length,
    staleAccepted,
    wrongResult,
    completedTwice,
    stops,
    kills,
  };
}
