import type { Token } from '../core/types.js';

/**
 * Why an attempt's signal fired: its lease was lost or expired (`lease_lost`), the queue no
 * longer holds this attempt (`queue_took_back`: a heartbeat the queue refused, or the queue's
 * own deadline for the job passed), or the worker is stopping (`stopping`).
 */
export type AttemptAbortReason = 'lease_lost' | 'queue_took_back' | 'stopping';

/**
 * The outcome of one fenced attempt of a job. Expected outcomes are values:
 * - `completed` / `failed`: the handler's result (or error) was recorded by the queue, in the
 *   same step as the fence check of the attempt's token (see each adapter for "same step").
 * - `stale_attempt`: a newer attempt of the same job has claimed or written its scope; this
 *   attempt's completion or failure was refused and changed nothing at the queue.
 * - `not_active`: no newer attempt has fenced the job, but the queue no longer holds this
 *   attempt (it timed out, was retried, cancelled or deleted): the queue refused the report,
 *   or (`report: 'start'`) the handler did not run.
 * - `superseded`: a newer attempt had claimed the job before this one could start; the
 *   handler did not run.
 * - `lease_busy`: an earlier attempt's lease was still live after waiting; the handler did
 *   not run and the attempt was handed back to the queue as failed.
 * - `unavailable`: the lease store or the fence could not answer; the handler did not run,
 *   or its report could not be made (the queue's own deadline retries the job).
 * - `period_done` / `period_passed`: the job is a schedule's run (see `periodOf`) and another
 *   run of the same period (`period_done`) or of a newer period (`period_passed`) completed
 *   first. The handler did not run and the job was completed at the queue; or, when the other
 *   run completed while this one's handler ran (its lease was lost), the job was handed back
 *   to the queue as failed, and its retry ends the same way.
 */
export type AttemptResult<R = unknown> =
  | { readonly status: 'completed'; readonly token: Token; readonly value: R }
  | { readonly status: 'failed'; readonly token: Token; readonly error: unknown }
  | {
      readonly status: 'stale_attempt';
      readonly token: Token;
      /** What this attempt tried to report. */
      readonly report: 'complete' | 'fail';
      /** The newer token the job's scope had seen. */
      readonly highWaterMark: bigint;
    }
  | {
      readonly status: 'not_active';
      readonly token: Token;
      /** `start`: the queue no longer held the attempt once its lease was granted. */
      readonly report: 'start' | 'complete' | 'fail';
    }
  | { readonly status: 'superseded'; readonly token: Token; readonly highWaterMark: bigint }
  | { readonly status: 'lease_busy'; readonly retryAfterMs: number }
  | { readonly status: 'unavailable'; readonly cause: unknown }
  | {
      readonly status: 'period_done' | 'period_passed';
      readonly token: Token;
      /** The start (ms since the epoch) of the latest period whose run completed. */
      readonly latestPeriod: bigint;
    };

/** The `status` values of {@link AttemptResult}, e.g. for a metric label. */
export type AttemptStatus = AttemptResult['status'];

/** What an {@link AttemptResult} hook is told: the job, the lease key and the result. */
export interface AttemptOutcome {
  readonly queue: string;
  readonly jobId: string;
  /** The lease key and fence scope of the job (`jobs/<queue>/<id>`). */
  readonly scope: string;
  readonly result: AttemptResult;
}
