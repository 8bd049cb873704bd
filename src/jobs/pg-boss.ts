import { invalidArgument } from '../core/errors.js';
import type { Token } from '../core/types.js';
import type { PostgresFence } from '../fencing/postgres.js';
import type { AttemptResult } from './attempt-result.js';
import { FencedWorker } from './fenced-worker.js';
import { runAttempt, type ReportAnswer } from './attempt.js';
import {
  affectedCount,
  type PgBossCommandResponse,
  type PgBossDb,
  type PgBossJob,
  type PgBossLike,
} from './pg-boss-client.js';
import { attemptScopes, resolvePeriodOf, type PeriodOf, type SchedulePeriod } from './period.js';
import { errorPayload } from './poll-loop.js';
import {
  MAX_DEFAULT_TTL_MS,
  resolveWorkerOptions,
  type FencedWorkerOptions,
} from './worker-options.js';

export type {
  AttemptAbortReason,
  AttemptOutcome,
  AttemptResult,
  AttemptStatus,
} from './attempt-result.js';
export type { JobAttemptContext, JobHandler } from './attempt.js';
export type { FencedWorkerOptions } from './worker-options.js';
export type { PgBossDb, PgBossJob, PgBossLike } from './pg-boss-client.js';
export type { PeriodOf, SchedulePeriod } from './period.js';

/** Options for {@link PgBossFencedWorker}. */
export interface PgBossFencedWorkerOptions<T, R> extends FencedWorkerOptions<PgBossJob<T>, R> {
  /** Your started `PgBoss` instance (pg-boss 12.38 or later). */
  readonly boss: PgBossLike;
  /**
   * The fence that checks each completion and failure: a `PostgresFence` on the database of
   * pg-boss's own tables, so the check runs in the same transaction as pg-boss's update.
   */
  readonly fence: PostgresFence;
}

/**
 * A pg-boss worker whose attempts are fenced (docs/jobs.md): each attempt of a job runs under a
 * lease on the job's scope, with a token greater than every earlier attempt's; the token is
 * claimed on `fence` before the handler runs; the completion or failure runs pg-boss's own
 * `complete()` / `fail()` inside the fence's transaction, so a stale attempt's report is
 * refused (`stale_attempt`) and leaves the newer attempt's outcome alone. Heartbeats (pg-boss
 * `touch()`) go out at the lease's renewal cadence; the handler's signal fires at the earlier
 * of the lease's loss and the queue taking the job back.
 *
 * @example
 * const worker = new PgBossFencedWorker({ boss, queue: 'invoices', client, fence,
 *   handler: async ({ job, token, scope }) => {
 *     const r = await fence.write({ scope, token }, (tx) => tx.query('UPDATE …'));
 *     if (r.status !== 'applied') throw new Error('superseded');
 *   } });
 * worker.start();
 */
export class PgBossFencedWorker<T = unknown, R = unknown> extends FencedWorker<PgBossJob<T>, R> {
  private readonly boss: PgBossLike;
  private readonly fence: PostgresFence;
  private readonly periodOf: PeriodOf<PgBossJob<T>> | undefined;

  constructor(options: PgBossFencedWorkerOptions<T, R>) {
    super(resolveWorkerOptions(options));
    if (typeof options.boss?.fetch !== 'function')
      throw invalidArgument('boss', 'must be a started PgBoss instance', options.boss);
    if (typeof options.fence?.write !== 'function')
      throw invalidArgument('fence', 'must be a PostgresFence', options.fence);
    this.boss = options.boss;
    this.fence = options.fence;
    // pg-boss forwards a schedule's occurrence as a plain job: nothing on it names the period.
    this.periodOf = resolvePeriodOf(options.periodOf, undefined, options.fence);
  }

  /** Fetches one job and runs its attempt; undefined when the queue had none. */
  async runOnce(): Promise<AttemptResult<R> | undefined> {
    const fetchedAt = this.options.client.now();
    const [job] = await this.boss.fetch(
      this.options.queue,
      this.periodOf === undefined ? { batchSize: 1 } : { batchSize: 1, includeMetadata: true },
    );
    if (job === undefined) return undefined;
    return this.run(job as PgBossJob<T>, fetchedAt);
  }

  private run(job: PgBossJob<T>, fetchedAt: number): Promise<AttemptResult<R>> {
    const { boss, fence } = this;
    const o = this.options;
    const queue = o.queue;
    const attempt = { id: job.id, retryCount: job.retryCount };
    // The queue's deadline: heartbeats, if the queue has them, else the job's run-time limit.
    const queueMs = (job.heartbeatSeconds ?? job.expireInSeconds) * 1000;
    const ttlMs = Math.min(o.ttlMs ?? MAX_DEFAULT_TTL_MS, queueMs);
    const { scope, period } = attemptScopes(o.keyPrefix, queue, job.id, job, this.periodOf, fence);
    return runAttempt<PgBossJob<T>, R>({
      client: o.client,
      fence,
      queue,
      jobId: job.id,
      job,
      scope,
      ttlMs,
      waitMs: o.waitMs ?? ttlMs,
      heartbeatMs: Math.floor(ttlMs / 3),
      queueDeadline: fetchedAt + job.expireInSeconds * 1000,
      handler: o.handler,
      period,
      stopSignal: this.stopping.signal,
      logger: o.logger,
      onOutcome: o.onOutcome,
      heartbeat: async () => affectedCount(await boss.touch(queue, attempt)) > 0,
      report: (kind, payload, token) =>
        settleFenced(fence, scope, token, (db) =>
          kind === 'complete'
            ? boss.complete(queue, attempt, completionData(payload), { db })
            : boss.fail(queue, attempt, errorPayload(payload), { db }),
        ),
      giveBack: async (why) => {
        await boss.fail(queue, attempt, { message: why });
      },
    });
  }
}

/**
 * A `periodOf` for a pg-boss schedule: every job of `queue` is a run of `schedule`, and its
 * period is the `periodMs` window its creation time falls in (UTC, from the epoch). pg-boss
 * forwards an occurrence to the queue without its slot, so the creation time is all the job
 * carries: one made more than a window after its occurrence (a forward delayed by retries)
 * counts for the next period.
 *
 * @example
 * new PgBossFencedWorker({ …, periodOf: pgBossCreatedPeriod('nightly-report', 60_000) })
 */
export function pgBossCreatedPeriod<T>(
  schedule: string,
  periodMs = 60_000,
): (job: PgBossJob<T>) => SchedulePeriod | undefined {
  if (!Number.isSafeInteger(periodMs) || periodMs < 1)
    throw invalidArgument('periodMs', 'must be a whole number of ms, at least 1', periodMs);
  return (job) => {
    const at = job.createdOn === undefined ? NaN : new Date(job.createdOn).getTime();
    if (!Number.isFinite(at)) return undefined;
    return { schedule, start: Math.floor(at / periodMs) * periodMs };
  };
}

/** pg-boss keeps an object as the output, and wraps anything else as `{ value }` itself. */
function completionData(value: unknown): object | null {
  if (value === undefined || value === null) return null;
  return typeof value === 'object' ? value : { value };
}

/** Thrown inside the fenced transaction when pg-boss did not settle the attempt: rolls it back. */
class NotActive extends Error {}

/**
 * Runs pg-boss's settle inside the fence's transaction: the scope's mark is locked and checked
 * against `token` first, then pg-boss's UPDATE runs on the same connection and commits with it.
 * A settle pg-boss refuses (the attempt is no longer active) rolls the transaction back.
 */
async function settleFenced(
  fence: PostgresFence,
  scope: string,
  token: Token,
  settle: (db: PgBossDb) => Promise<PgBossCommandResponse>,
): Promise<ReportAnswer> {
  try {
    const r = await fence.write({ scope, token }, async (tx) => {
      const db: PgBossDb = {
        executeSql: async (text, values) => ({ rows: (await tx.query(text, values)).rows }),
      };
      if (affectedCount(await settle(db)) === 0) throw new NotActive();
    });
    if (r.status === 'stale_fence')
      return { status: 'stale_fence', highWaterMark: r.highWaterMark };
    return { status: 'recorded' };
  } catch (err) {
    if (err instanceof NotActive) return { status: 'not_active' };
    throw err;
  }
}
