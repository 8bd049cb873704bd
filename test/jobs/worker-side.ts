// The child side of the real-process job tests: one worker process per queue script
// (pg-boss-worker.ts, bullmq-worker.ts, graphile-worker-process.ts), started by fork() with a
// JSON config as argv[2], talking to the test over IPC:
//   test → worker: { cmd: 'take' }     fetch until one job is fetched, run its attempt
//                  { cmd: 'proceed' }  let a held handler go on to its write and report
//                  { cmd: 'work' }     run attempts until stopped (the soak)
//   worker → test: { ev: 'ready' }, { ev: 'started', jobId, token }, { ev: 'write', status },
//                  { ev: 'done', jobId, status, token? }
import { setTimeout as delay } from 'node:timers/promises';
import type { AttemptOutcome } from '../../src/jobs/attempt-result.js';

/** What every worker script's config holds, besides its queue's own fields. */
export interface WorkerSideConfig {
  readonly name: string;
  /** With the adapter (fenced) or the queue alone. */
  readonly fenced: boolean;
  /** Hold each handler after it starts until the test says `proceed`. */
  readonly hold: boolean;
  /** The soak: each job takes a while, logs its accepted write, and its output names its token. */
  readonly soak?: boolean;
}

/** The config the test passed to this process. */
export function workerConfig<C extends WorkerSideConfig>(): C {
  return JSON.parse(process.argv[2]!) as C;
}

/** Sends one event to the test. */
export function send(m: Record<string, unknown>): void {
  process.send?.(m);
}

/** The `hold` gate of a handler: armed before a take, opened by the test's `proceed`. */
export class Hold {
  private open: () => void = () => undefined;
  private gate = Promise.resolve();

  constructor(private readonly enabled: boolean) {}

  /** Closes the gate (when holding is on) until the next `proceed`. */
  arm(): void {
    if (!this.enabled) return;
    this.gate = new Promise((resolve) => {
      this.open = resolve;
    });
  }

  /** Resolves once the handler may go on. */
  passed(): Promise<void> {
    return this.gate;
  }

  proceed(): void {
    this.open();
  }
}

/**
 * The handler's step of a soak job: a while, so that pauses and kills land inside handlers.
 * Nothing in `npm test` asks the job to be quick.
 */
export function soakWork(): Promise<void> {
  return delay(100 + Math.random() * 600);
}

/** Tells the test one attempt's outcome (the adapters' `onOutcome`). */
export function sendOutcome(o: AttemptOutcome): void {
  const r = o.result;
  send({
    ev: 'done',
    jobId: o.jobId,
    status: r.status,
    token: 'token' in r ? String(r.token) : undefined,
  });
}

/** How a worker script runs jobs: one at a time (`once`), or a runner of the queue's own. */
export type WorkerLoop = { readonly once: () => Promise<boolean> } | { readonly start: () => void };

/**
 * Answers the test's commands and says `ready`. With `once`: `take` runs it until it has run
 * one job (at most 600 tries, 50 ms apart: after the queue's sweep, for a retried job), and
 * `work` runs it for good. With `start`: either command starts the queue's own runner, once.
 */
export function serveWorker(hold: Hold, loop: WorkerLoop): void {
  let started = false;
  const once = async () => {
    hold.arm();
    return 'once' in loop ? loop.once() : false;
  };
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'proceed') hold.proceed();
    if (m.cmd !== 'take' && m.cmd !== 'work') return;
    if ('start' in loop) {
      if (!started) {
        // One hold for the runner's whole life: the pause test's worker takes one job.
        hold.arm();
        loop.start();
      }
      started = true;
      return;
    }
    if (m.cmd === 'take') {
      void (async () => {
        for (let i = 0; i < 600; i++) {
          if (await once()) return;
          await delay(50);
        }
        send({ ev: 'gave_up' });
      })();
    } else {
      void (async () => {
        for (;;) {
          if (!(await once())) await delay(50);
        }
      })();
    }
  });
  send({ ev: 'ready' });
}
