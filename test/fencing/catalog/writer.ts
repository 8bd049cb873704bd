import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { WriterConfig, WriterRequest } from './writer-process.js';

type Request = WriterRequest extends infer R
  ? R extends { id: number }
    ? Omit<R, 'id'>
    : never
  : never;

const REPLY_TIMEOUT_MS = 30_000;

/** One report writer child process (writer-process.ts), driven over IPC. */
export class Writer {
  private nextId = 1;
  private readonly pending = new Map<number, (reply: Record<string, unknown>) => void>();
  private readonly child: ChildProcess;
  readonly exited: Promise<NodeJS.Signals | number | null>;
  private readonly ready: Promise<void>;

  constructor(
    readonly name: string,
    config: WriterConfig,
  ) {
    this.child = fork(fileURLToPath(new URL('./writer-process.js', import.meta.url)), [], {
      env: { ...process.env, LEASEHOLD_CATALOG_WRITER: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let onReady!: () => void;
    this.ready = new Promise((r) => (onReady = r));
    this.child.on(
      'message',
      (msg: { id?: number; ready?: boolean; reply?: Record<string, unknown> }) => {
        if (msg.ready === true) return onReady();
        if (msg.id !== undefined) {
          this.pending.get(msg.id)?.(msg.reply ?? {});
          this.pending.delete(msg.id);
        }
      },
    );
    this.exited = new Promise((resolve) =>
      this.child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
  }

  /** Sends a request and resolves with the reply; rejects if the process exits or times out first. */
  async request(req: Request): Promise<Record<string, unknown>> {
    await Promise.race([
      this.ready,
      this.exited.then(() => Promise.reject(new Error(`${this.name} exited before ready`))),
    ]);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name} did not answer ${req.cmd} in time`)),
        REPLY_TIMEOUT_MS,
      );
      void this.exited.then((how) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${String(how)}) before answering ${req.cmd}`));
      });
      this.pending.set(id, (reply) => {
        clearTimeout(timer);
        resolve(reply);
      });
      this.child.send({ ...req, id });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** True while the process is stopped (SIGSTOP), from /proc. */
  isStopped(): boolean {
    try {
      return /^\d+ \(.*\) [Tt] /.test(readFileSync(`/proc/${this.pid}/stat`, 'utf8'));
    } catch {
      return false;
    }
  }

  /** Waits (bounded) until the kernel shows the process stopped. */
  async waitStopped(): Promise<void> {
    for (let i = 0; !this.isStopped(); i++) {
      if (i > 2000) throw new Error(`${this.name} did not stop`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }

  /**
   * SIGKILL, and waits for the exit. No SIGCONT first: Linux kills a stopped process as it is,
   * while a SIGCONT would let it run on (and, stopped before a COMMIT, send it) until the
   * SIGKILL lands — a clean-clone run once saw a "killed before COMMIT" publish visible.
   */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }
}
