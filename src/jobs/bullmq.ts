import { randomUUID } from 'node:crypto';
import { invalidArgument } from '../core/errors.js';
import type { ClaimTarget } from '../core/fence-claim.js';
import type { AttemptResult } from './attempt-result.js';
import { runAttempt, type ReportAnswer } from './attempt.js';
import { isLostLock, type BullMqJob, type BullMqWorkerLike } from './bullmq-client.js';
import { FencedWorker } from './fenced-worker.js';
import { attemptScopes, bullMqPeriod, resolvePeriodOf, type PeriodOf } from './period.js';
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
export type { BullMqJob, BullMqWorkerLike } from './bullmq-client.js';
export type { FencedWorkerOptions } from './worker-options.js';
export type { PeriodOf, SchedulePeriod } from './period.js';
export { bullMqPeriod } from './period.js';

/** BullMQ's default `lockDuration`. */
const BULLMQ_LOCK_MS = 30_000;

/** Options for {@link BullMqFencedWorker}. */
export interface BullMqFencedWorkerOptions<T, R> extends FencedWorkerOptions<BullMqJob<T>, R> {
  /** A BullMQ `Worker` made without a processor (`new Worker(name, null, opts)`), not running. */
  readonly worker: BullMqWorkerLike;
  /**
   * The fence that checks each completion and failure before BullMQ's own lock check (a
   * `RedisFence` on the queue's Redis, or any fence with `claim`). Scheduled jobs get one run
   * per period only with a fence that also has `highWaterMark` (`RedisFence` has).
   */
  readonly fence: ClaimTarget;
}

/**
 * A BullMQ worker whose attempts are fenced (docs/jobs.md): each attempt runs under a lease on
 * the job's scope whose token is claimed on `fence` before the handler runs. Its report is
 * checked twice, in order: the fence (is this still the newest attempt?), then BullMQ's lock
 * token (does this attempt still hold the job?) in BullMQ's own finishing script. A newer
 * attempt exists only once BullMQ has handed the job out again, which needs this attempt's
 * lock gone; so an attempt that passes both checks is the newest one and still the holder.
 * Lock extensions (`extendLock`) go out at the lease's renewal cadence. A job made by a job
 * scheduler is its scheduler's run for one period: one run per period completes, whichever
 * install of the queue made it (`periodOf`).
 *
 * @example
 * const worker = new BullMqFencedWorker({ worker: new Worker('mail', null, { connection }),
 *   queue: 'mail', client, fence: redisFence,
 *   handler: ({ job, token, scope }) => redisFence.set(scope, token, `sent:${job.id}`, '1') });
 * worker.start();
 */
export class BullMqFencedWorker<T = unknown, R = unknown> extends FencedWorker<BullMqJob<T>, R> {
  private readonly worker: BullMqWorkerLike;
  private readonly fence: ClaimTarget;
  private readonly periodOf: PeriodOf<BullMqJob<T>> | undefined;

  constructor(options: BullMqFencedWorkerOptions<T, R>) {
    super(resolveWorkerOptions(options));
    if (typeof options.worker?.getNextJob !== 'function')
      throw invalidArgument(
        'worker',
        'must be a BullMQ Worker made without a processor',
        options.worker,
      );
    if (typeof options.fence?.claim !== 'function')
      throw invalidArgument('fence', 'must have a claim(scope, token) method', options.fence);
    this.worker = options.worker;
    this.fence = options.fence;
    // By default a job a job scheduler made is its scheduler's run for the period in its id.
    this.periodOf = resolvePeriodOf(options.periodOf, bullMqPeriod, options.fence);
  }

  /** Fetches one job and runs its attempt; undefined when the queue had none. */
  async runOnce(): Promise<AttemptResult<R> | undefined> {
    // The lock token BullMQ stores for this attempt: random, as BullMQ's own worker makes it.
    const lock = randomUUID();
    const job = (await this.worker.getNextJob(lock, { block: false })) as BullMqJob<T> | undefined;
    if (job === undefined || job.id === undefined) return undefined;
    return this.run(job, job.id, lock);
  }

  private run(job: BullMqJob<T>, jobId: string, lock: string): Promise<AttemptResult<R>> {
    const o = this.options;
    const lockMs = this.worker.opts.lockDuration ?? BULLMQ_LOCK_MS;
    const ttlMs = Math.min(o.ttlMs ?? MAX_DEFAULT_TTL_MS, lockMs);
    const fence = this.fence;
    const { scope, period } = attemptScopes(o.keyPrefix, o.queue, jobId, job, this.periodOf, fence);
    return runAttempt<BullMqJob<T>, R>({
      client: o.client,
      fence,
      queue: o.queue,
      jobId,
      job,
      scope,
      ttlMs,
      waitMs: o.waitMs ?? ttlMs,
      heartbeatMs: Math.floor(ttlMs / 3),
      // The lock, not a run-time limit, is BullMQ's deadline: extendLock says when it is gone.
      queueDeadline: undefined,
      handler: o.handler,
      period,
      stopSignal: this.stopping.signal,
      logger: o.logger,
      onOutcome: o.onOutcome,
      heartbeat: async () => (await job.extendLock(lock, lockMs)) > 0,
      report: async (kind, payload, token): Promise<ReportAnswer> => {
        const checked = await fence.claim(scope, token);
        if (checked.status === 'stale_fence')
          return { status: 'stale_fence', highWaterMark: checked.highWaterMark };
        try {
          if (kind === 'complete') await job.moveToCompleted(payload, lock, false);
          else await job.moveToFailed(asError(payload), lock, false);
        } catch (err) {
          if (isLostLock(err)) return { status: 'not_active' };
          throw err;
        }
        return { status: 'recorded' };
      },
      giveBack: async (why) => {
        await job.moveToFailed(new Error(why), lock, false);
      },
    });
  }
}

function asError(payload: unknown): Error {
  if (payload instanceof Error) return payload;
  const e = new Error(errorPayload(payload).message);
  return e;
}
