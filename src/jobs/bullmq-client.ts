// The part of BullMQ (6.x) the adapter calls, typed structurally so that leasehold loads no
// BullMQ code of its own: the user passes in a `Worker` made for manual fetching
// (`new Worker(name, null, opts)`). Names and shapes are BullMQ's own
// (node_modules/bullmq/dist/esm/classes/{worker,job}.d.ts, 6.7.6).

/** A job as BullMQ's `Worker.getNextJob()` returns it. */
export interface BullMqJob<T = unknown> {
  readonly id?: string | undefined;
  readonly name: string;
  readonly data: T;
  /** The id of the job scheduler (or repeatable) that made this job, if one did. */
  readonly repeatJobKey?: string | undefined;
  /** How many attempts have finished (failed or stalled) before this one. */
  readonly attemptsMade: number;
  /** Extends this attempt's lock by `duration` ms; 0 when `token` no longer holds it. */
  extendLock(token: string, duration: number): Promise<number>;
  /** Finishes the job; throws when `token` no longer holds its lock. */
  moveToCompleted(returnValue: unknown, token: string, fetchNext?: boolean): Promise<unknown>;
  /** Fails this attempt (retried if attempts remain); throws when `token` no longer holds its lock. */
  moveToFailed(err: Error, token: string, fetchNext?: boolean): Promise<unknown>;
}

/** The methods and options of a BullMQ `Worker` the adapter uses. */
export interface BullMqWorkerLike {
  readonly name: string;
  readonly opts: { readonly lockDuration?: number };
  getNextJob(token: string, options?: { block?: boolean }): Promise<BullMqJob | undefined>;
}

// BullMQ's answers when the lock is gone or not this attempt's (finished-errors.js): the job was
// taken back (stalled, moved to wait) or is held by a newer attempt.
const LOST_LOCK =
  /^(Missing lock for job|Lock mismatch for job|Missing key for job|Job \S+ is not in the)/;

/** Whether `err` is BullMQ saying this attempt no longer holds the job. */
export function isLostLock(err: unknown): boolean {
  return err instanceof Error && LOST_LOCK.test(err.message);
}
