import { invalidArgument, LeaseholdError } from '../core/errors.js';
import type { Token } from '../core/types.js';
import type { PostgresFence } from '../fencing/postgres.js';
import type { AttemptResult } from './attempt-result.js';
import { runAttempt, type ReportAnswer } from './attempt.js';
import { attemptScopes, graphileCronPeriod, resolvePeriodOf } from './period.js';
import {
  resolveWorkerOptions,
  MAX_DEFAULT_TTL_MS,
  type FencedWorkerOptions,
} from './worker-options.js';

export type {
  AttemptAbortReason,
  AttemptOutcome,
  AttemptResult,
  AttemptStatus,
} from './attempt-result.js';
export type { JobAttemptContext, JobHandler } from './attempt.js';
export type { PeriodOf, SchedulePeriod } from './period.js';
export { graphileCronPeriod } from './period.js';

/** The fields of a graphile-worker job (0.18, `interfaces.d.ts`) the adapter reads. */
export interface GraphileJob {
  readonly id: string;
  readonly task_identifier: string;
  readonly attempts: number;
  /** The worker pool holding the job's lock: this attempt's owner at the queue. */
  readonly locked_by: string | null;
  readonly payload: unknown;
}

/** The part of graphile-worker's `JobHelpers` the adapter uses. */
export interface GraphileHelpers {
  readonly job: GraphileJob;
  readonly abortSignal?: AbortSignal;
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** What a fenced task's handler receives as `job`: graphile-worker's job and the payload. */
export interface GraphileAttemptJob<P> {
  readonly job: GraphileJob;
  readonly payload: P;
}

/** Options for {@link fencedTask}. `queue` is the task identifier (the lease key's middle part). */
export interface FencedTaskOptions<P, R> extends FencedWorkerOptions<GraphileAttemptJob<P>, R> {
  /**
   * The fence that checks each completion: a `PostgresFence` on graphile-worker's database, so
   * the check and the job's deletion commit in one transaction.
   */
  readonly fence: PostgresFence;
  /** graphile-worker's schema (its `worker.schema` setting). Defaults to `graphile_worker`. */
  readonly workerSchema?: string;
}

/** Thrown to graphile-worker when this attempt's result must not count: it fails the attempt. */
export class StaleJobAttemptError extends Error {
  constructor(readonly result: AttemptResult) {
    super(`job attempt not recorded: ${result.status}`);
    this.name = 'StaleJobAttemptError';
  }
}

/** Thrown inside the fenced transaction when the job is no longer locked by this attempt. */
class NotLocked extends Error {}

/**
 * A graphile-worker task whose attempts are fenced (docs/jobs.md). Each attempt runs under a
 * lease on the job's scope whose token is claimed on `fence` first. On success the job is
 * completed by deleting its row in the fence's transaction, and only while this attempt's
 * worker still holds its lock (graphile-worker's own completion deletes by id alone);
 * graphile-worker's completion afterwards finds nothing left to delete. A stale or unlocked
 * attempt throws {@link StaleJobAttemptError}, and graphile-worker's failure of it changes
 * nothing, as its fail statement matches the lock holder (`locked_by`). Heartbeats read the
 * job's lock at the lease's renewal cadence: graphile-worker itself has none (a lock is
 * released after 4 hours, or by `forceUnlockWorkers`). A crontab job (its payload's `_cron.ts`)
 * is the task's run for that minute: one run per minute completes, whichever graphile-worker
 * install made it (`periodOf`).
 *
 * @example
 * const taskList = { send_invoice: fencedTask({ queue: 'send_invoice', client, fence,
 *   handler: async ({ job, token, scope }) => fence.write({ scope, token }, (tx) => …) }) };
 * await run({ connectionString, taskList });
 */
export function fencedTask<P = unknown, R = unknown>(
  options: FencedTaskOptions<P, R>,
): (payload: unknown, helpers: GraphileHelpers) => Promise<void> {
  const o = resolveWorkerOptions(options);
  const fence = options.fence;
  if (typeof fence?.write !== 'function')
    throw invalidArgument('fence', 'must be a PostgresFence', fence);
  const schema = options.workerSchema ?? 'graphile_worker';
  // Quoted into SQL below: letters, digits and underscores only, as graphile-worker's own names.
  if (typeof schema !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema))
    throw invalidArgument('workerSchema', 'must be a plain SQL identifier', schema);
  const jobs = `"${schema}"._private_jobs`;
  const ttlMs = o.ttlMs ?? MAX_DEFAULT_TTL_MS;
  const periodOf = resolvePeriodOf<GraphileAttemptJob<P>>(
    options.periodOf,
    ({ job, payload }) => graphileCronPeriod(job.task_identifier, payload),
    fence,
  );
  return async (payload, helpers) => {
    const job = helpers.job;
    const owner = job.locked_by;
    if (owner === null)
      throw new LeaseholdError('ERR_INVALID_ARGUMENT', `job ${job.id} is not locked by a worker`);
    const attemptJob: GraphileAttemptJob<P> = { job, payload: payload as P };
    const { scope, period } = attemptScopes(
      o.keyPrefix,
      o.queue,
      job.id,
      attemptJob,
      periodOf,
      fence,
    );
    const result = await runAttempt<GraphileAttemptJob<P>, R>({
      client: o.client,
      fence,
      queue: o.queue,
      jobId: job.id,
      job: attemptJob,
      scope,
      ttlMs,
      waitMs: o.waitMs ?? ttlMs,
      heartbeatMs: Math.floor(ttlMs / 3),
      queueDeadline: undefined,
      handler: o.handler,
      period,
      stopSignal: helpers.abortSignal ?? new AbortController().signal,
      logger: o.logger,
      onOutcome: o.onOutcome,
      // graphile-worker has no heartbeat: this reads whether the job is still locked by this
      // attempt's worker (an operator's forceUnlockWorkers, or the 4-hour reset, takes it back).
      heartbeat: async () =>
        (
          await helpers.query(
            `SELECT 1 FROM ${jobs} WHERE id = $1::bigint AND locked_by = $2::text`,
            [job.id, owner],
          )
        ).rows.length > 0,
      report: (kind, _payload, token) =>
        kind === 'complete'
          ? complete(fence, scope, token, jobs, job.id, owner)
          : checkOnly(fence, scope, token),
      // Throwing below hands the attempt back: graphile-worker fails it and retries later.
      giveBack: () => Promise.resolve(),
    });
    // A skipped period's job was deleted in the fence's transaction, as a completion is.
    if (
      result.status === 'completed' ||
      result.status === 'period_done' ||
      result.status === 'period_passed'
    )
      return;
    if (result.status === 'failed') throw result.error;
    throw new StaleJobAttemptError(result);
  };
}

/** Deletes the job in the fence's transaction, only while `owner` holds its lock. */
async function complete(
  fence: PostgresFence,
  scope: string,
  token: Token,
  jobs: string,
  id: string,
  owner: string,
): Promise<ReportAnswer> {
  try {
    const r = await fence.write({ scope, token }, async (tx) => {
      const d = await tx.query(
        `DELETE FROM ${jobs} WHERE id = $1::bigint AND locked_by = $2::text`,
        [id, owner],
      );
      if (d.rowCount === 0) throw new NotLocked();
    });
    if (r.status === 'stale_fence')
      return { status: 'stale_fence', highWaterMark: r.highWaterMark };
    return { status: 'recorded' };
  } catch (err) {
    if (err instanceof NotLocked) return { status: 'not_active' };
    throw err;
  }
}

/** A failure is recorded by graphile-worker itself (matching the lock holder); this orders it. */
async function checkOnly(fence: PostgresFence, scope: string, token: Token): Promise<ReportAnswer> {
  const r = await fence.claim(scope, token);
  return r.status === 'stale_fence'
    ? { status: 'stale_fence', highWaterMark: r.highWaterMark }
    : { status: 'recorded' };
}
