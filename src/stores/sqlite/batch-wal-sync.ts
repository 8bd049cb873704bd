import { closeSync, fdatasync, fsyncSync, openSync } from 'node:fs';
import { dirname } from 'node:path';

/** Flushes a file to disk; called back with an error when it did not. */
export type SyncFile = (fd: number, done: (err: Error | null) => void) => void;

/**
 * The durability barrier of a group-committing SQLite store: the store commits with
 * `synchronous = NORMAL` (SQLite writes the WAL frames but does not fsync them), and
 * {@link durable} resolves once an fdatasync of the WAL that *started after the call* has
 * finished — so everything committed before the call is on disk. The fdatasync runs on libuv's
 * thread pool: the event loop keeps reading and answering requests while the disk works, and
 * every commit made meanwhile shares the next one. At most one sync runs at a time.
 *
 * Why this equals `synchronous = FULL` for what was committed: FULL makes SQLite fdatasync the
 * WAL at each commit; NORMAL does everything else the same (the WAL header is synced when the
 * WAL restarts, the database file after each checkpoint). An fdatasync of the WAL file flushes
 * every page of that file, whoever wrote it, including the size it grew to.
 *
 * A failed sync poisons the barrier: after an fsync error Linux may drop the dirty pages and
 * report success on the next fsync, so no later grant could be trusted to be on disk. Every
 * later {@link durable} rejects; the store must be reopened.
 */
export class WalSync {
  /** Waiters covered by the sync in flight. */
  private inFlight: Array<Waiter> | undefined;
  /** Waiters that arrived while a sync was in flight: they need the next one. */
  private next: Array<Waiter> = [];
  private failure: Error | undefined;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly fd: number,
    private readonly syncFile: SyncFile = fdatasync,
  ) {}

  /** Resolves once everything committed before this call is on disk; rejects if a sync failed. */
  durable(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return new Promise<void>((resolve, reject) => {
      this.next.push({ resolve, reject });
      if (this.inFlight === undefined) this.start();
    });
  }

  /** Whether a sync runs or waits. */
  get busy(): boolean {
    return this.inFlight !== undefined;
  }

  /** Resolves when no sync runs and none waits (for close). */
  idle(): Promise<void> {
    if (this.inFlight === undefined) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Closes the WAL's descriptor; call once {@link idle} has resolved. */
  close(): void {
    this.failure ??= new Error('the SQLite lease store was closed');
    closeSync(this.fd);
  }

  private start(): void {
    const batch = this.next;
    this.next = [];
    this.inFlight = batch;
    this.syncFile(this.fd, (err) => {
      this.inFlight = undefined;
      if (err !== null && this.failure === undefined) {
        this.failure = Object.assign(new Error(`fdatasync of the SQLite WAL failed: ${err}`), {
          cause: err,
        });
      }
      const failure = this.failure;
      for (const w of batch) {
        if (failure === undefined) w.resolve();
        else w.reject(failure);
      }
      if (this.next.length > 0) {
        if (failure === undefined) return this.start();
        for (const w of this.next) w.reject(failure);
        this.next = [];
      }
      for (const done of this.idleWaiters.splice(0)) done();
    });
  }
}

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
}

/**
 * Opens the WAL file for fdatasync, after fsyncing its directory once: SQLite syncs the
 * directory of a new WAL at the WAL's first sync, which with NORMAL would only come at the first
 * checkpoint, and a WAL whose directory entry is lost in a power cut takes its grants with it.
 */
export function openWalForSync(dbPath: string): number {
  const dir = openSync(dirname(dbPath), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
  return openSync(`${dbPath}-wal`, 'r');
}
