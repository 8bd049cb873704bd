import { fork, type ChildProcess } from 'node:child_process';

/** A message a job worker process sent. */
export type WorkerEvent = { ev: string; jobId?: string; status?: string; token?: string } & Record<
  string,
  unknown
>;

/**
 * A job worker child process: its messages are kept in order, and the test waits for the next
 * one matching a predicate (bounded by `ms`).
 */
export class WorkerProcess {
  readonly events: WorkerEvent[] = [];
  private readonly waiters: {
    match: (e: WorkerEvent) => boolean;
    resolve: (e: WorkerEvent) => void;
    fail: (err: Error) => void;
  }[] = [];
  private readonly exited: Promise<void>;
  private readonly child: ChildProcess;

  constructor(script: URL, config: object) {
    this.child = fork(script, [JSON.stringify(config)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (m: WorkerEvent) => {
      this.events.push(m);
      for (const w of this.waiters.splice(0)) {
        if (w.match(m)) w.resolve(m);
        else this.waiters.push(w);
      }
    });
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        // A worker that died fails its waiters now, not at their time bound.
        for (const w of this.waiters.splice(0))
          w.fail(new Error(`worker exited (${code ?? signal})`));
        resolve();
      }),
    );
  }

  get pid(): number {
    return this.child.pid!;
  }

  send(message: object): void {
    this.child.send(message);
  }

  /** The first event (already seen or to come) that `match` accepts. */
  next(match: (e: WorkerEvent) => boolean, ms: number, what: string): Promise<WorkerEvent> {
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`worker ${this.pid}: no ${what} within ${ms}ms`)),
        ms,
      );
      this.waiters.push({
        match,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
        fail: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
    });
  }

  stop(): void {
    this.child.kill('SIGSTOP');
  }

  cont(): void {
    this.child.kill('SIGCONT');
  }

  /** SIGKILL (after SIGCONT, so a stopped process dies at once) and wait for the exit. */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }
}
