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

  constructor(options: PgBossFencedWorkerOptions<T, R>) {
    super(resolveWorkerOptions(options));
    if (typeof options.boss?.fetch !== 'function')
      throw invalidArgument('boss', 'must be a started PgBoss instance', options.boss);
    if (typeof options.fence?.write !== 'function')
      throw invalidArgument('fence', 'must be a PostgresFence', options.fence);
    this.boss = options.boss;
    this.fence = options.fence;
  }

  /** Fetches one job and runs its attempt; undefined when the queue had none. */
  async runOnce(): Promise<AttemptResult<R> | undefined> {
    const fetchedAt = this.options.client.now();
    const [job] = await this.boss.fetch(this.options.queue, { batchSize: 1 });
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
    const scope = this.scopeOf(job.id);
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
