import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { WorkerNotice, WorkerReply, WorkerRequest } from './protocol.js';

/** A request to a worker, without the id the worker answers it by. */
export type Request = WorkerRequest extends infer R
  ? R extends { id: number }
    ? Omit<R, 'id'>
    : never
  : never;

/** One worker child process, driven over IPC. */
export class RealWorker {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (reply: Record<string, unknown>) => void; reject: (err: Error) => void }
  >();
  private readonly waiters: {
    event: WorkerNotice['event'];
    resolve: (n: WorkerNotice) => void;
    reject: (err: Error) => void;
  }[] = [];
  private readonly exited: Promise<number | null>;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
    private readonly onNotice: (w: RealWorker, n: WorkerNotice) => void,
    private readonly replyTimeoutMs: number,
  ) {
    child.on('message', (msg: WorkerReply | WorkerNotice) => {
      if ('id' in msg) {
        this.pending.get(msg.id)?.resolve(msg.reply);
        this.pending.delete(msg.id);
        return;
      }
      this.onNotice(this, msg);
      const i = this.waiters.findIndex((w) => w.event === msg.event);
      if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(msg);
    });
    this.exited = new Promise((resolve) =>
      child.on('exit', (code, signal) => {
        // A dead worker sends no more notices: fail its waiters now, not at their timeout.
        for (const w of this.waiters.splice(0))
          w.reject(new Error(`worker ${this.name} exited (${signal ?? code}) before ${w.event}`));
        // Nor answers: a request in flight when the worker was killed fails now (its outcome
        // is unknown, `:info` in the history).
        for (const p of this.pending.values())
          p.reject(new Error(`worker ${this.name} exited (${signal ?? code}) before answering`));
        this.pending.clear();
        resolve(code);
      }),
    );
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Sends a request and resolves with the worker's reply (rejects after the reply timeout). */
  request(req: Request): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new Error(
            `worker ${this.name} did not answer ${req.cmd} within ${this.replyTimeoutMs}ms`,
          ),
        );
      }, this.replyTimeoutMs);
      this.pending.set(id, {
        resolve: (reply) => {
          clearTimeout(timer);
          resolve(reply);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      this.child.send({ ...req, id });
    });
  }

  /**
   * Resolves with the next notice of this kind (`checked`, `writing`, `lost`, `renewed`);
   * rejects after the reply timeout or when the worker exits first.
   */
  next(event: WorkerNotice['event']): Promise<WorkerNotice> {
    return new Promise((resolve, reject) => {
      const waiter = {
        event,
        resolve: (n: WorkerNotice) => {
          clearTimeout(timer);
          resolve(n);
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new Error(`worker ${this.name} sent no ${event} within ${this.replyTimeoutMs}ms`));
      }, this.replyTimeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** True while the process is stopped (SIGSTOP), from /proc on Linux. */
  isStopped(): boolean {
    try {
      const stat = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
      return /^\d+ \(.*\) [Tt] /.test(stat);
    } catch {
      return false;
    }
  }

  /** Sends a real signal to the worker. */
  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }

  /** Resolves with the exit code once the process has exited. */
  waitExit(): Promise<number | null> {
    return this.exited;
  }

  /** Stops the worker: SIGCONT (in case it is stopped), then SIGKILL; waits for the exit. */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }
}
