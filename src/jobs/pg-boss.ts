import type { LeaseClient } from '../core/client.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { invalidArgument } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/events.js';
import type { Token } from '../core/types.js';
import { validateKey } from '../core/validate.js';
import type { PostgresFence } from '../fencing/postgres.js';
import type { AttemptOutcome, AttemptResult } from './attempt-result.js';
import { runAttempt, type JobHandler, type ReportAnswer } from './attempt.js';
import {
  affectedCount,
  type PgBossCommandResponse,
  type PgBossDb,
  type PgBossJob,
  type PgBossLike,
} from './pg-boss-client.js';
import { errorPayload, pollLoop } from './poll-loop.js';

export type {
  AttemptAbortReason,
  AttemptOutcome,
  AttemptResult,
  AttemptStatus,
} from './attempt-result.js';
export type { JobAttemptContext, JobHandler } from './attempt.js';
export type { PgBossDb, PgBossJob, PgBossLike } from './pg-boss-client.js';

/** Options for {@link PgBossFencedWorker}. */
export interface PgBossFencedWorkerOptions<T, R> {
  /** Your started `PgBoss` instance (pg-boss 12). */
  readonly boss: PgBossLike;
  /** The queue to work. */
  readonly queue: string;
  /** The lease client whose store issues the attempt tokens (any leasehold store). */
  readonly client: LeaseClient;
  /**
   * The fence that checks each completion and failure: a `PostgresFence` on the database of
   * pg-boss's own tables, so the check runs in the same transaction as pg-boss's update.
   */
  readonly fence: PostgresFence;
  /** Runs one attempt; its value completes the job, a throw fails it. */
  readonly handler: JobHandler<PgBossJob<T>, R>;
  /**
   * The attempt lease's TTL. Never longer than the queue's own deadline for the job (its
   * `heartbeatSeconds`, else its `expireInSeconds`): a longer one is cut to it. Defaults to
   * that deadline, at most `30s`.
   */
  readonly ttl?: Duration;
  /**
   * How long a new attempt waits for an earlier attempt's lease to lapse before handing the job
   * back to the queue as failed. Defaults to the attempt's TTL.
   */
  readonly wait?: Duration;
  /** The lease key and fence scope of a job is `<keyPrefix><queue>/<job id>`. Defaults to `jobs/`. */
  readonly keyPrefix?: string;
  /** How long to wait between fetches of an empty queue. Defaults to `1s`. */
  readonly pollInterval?: Duration;
  /** Attempts run at once by this worker. Defaults to 1. */
  readonly concurrency?: number;
  /** Log lines for stale and failed reports. Defaults to none. */
  readonly logger?: Logger;
  /** Told every attempt's result, e.g. to count them by `result.status` in a metric. */
  readonly onOutcome?: (outcome: AttemptOutcome) => void;
}

const MAX_TTL_MS = 30_000;

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
export class PgBossFencedWorker<T = unknown, R = unknown> {
  private readonly o: PgBossFencedWorkerOptions<T, R>;
  private readonly keyPrefix: string;
  private readonly ttlMs: number | undefined;
  private readonly waitMs: number | undefined;
  private readonly pollMs: number;
  private readonly concurrency: number;
  private readonly logger: Logger;
  private readonly stopping = new AbortController();
  private loops: Promise<void>[] = [];

  constructor(options: PgBossFencedWorkerOptions<T, R>) {
    this.o = options;
    if (typeof options.queue !== 'string' || options.queue === '')
      throw invalidArgument('queue', 'must be a non-empty string', options.queue);
    if (typeof options.handler !== 'function')
      throw invalidArgument('handler', 'must be a function', options.handler);
    this.keyPrefix = options.keyPrefix ?? 'jobs/';
    validateKey(`${this.keyPrefix}${options.queue}/x`, 'keyPrefix');
    this.ttlMs = options.ttl === undefined ? undefined : parseDuration('ttl', options.ttl);
    this.waitMs = options.wait === undefined ? undefined : parseDuration('wait', options.wait);
    this.pollMs = parseDuration('pollInterval', options.pollInterval ?? '1s');
    this.concurrency = options.concurrency ?? 1;
    if (!Number.isSafeInteger(this.concurrency) || this.concurrency < 1 || this.concurrency > 256)
      throw invalidArgument(
        'concurrency',
        'must be a whole number from 1 to 256',
        this.concurrency,
      );
    this.logger = options.logger ?? silentLogger;
  }

  /** Starts fetching and running jobs in the background until {@link stop}. */
  start(): void {
    if (this.loops.length > 0) return;
    for (let i = 0; i < this.concurrency; i++) {
      this.loops.push(
        pollLoop(() => this.runOnce(), this.pollMs, this.stopping.signal, this.logger),
      );
    }
  }

  /** Stops fetching, fires the running attempts' signals and waits for them to settle. */
  async stop(): Promise<void> {
    this.stopping.abort('stopping');
    await Promise.all(this.loops);
    this.loops = [];
  }

  /** Fetches one job and runs its attempt; undefined when the queue had none. */
  async runOnce(): Promise<AttemptResult<R> | undefined> {
    const { boss, queue } = this.o;
    const fetchedAt = this.o.client.now();
    const [job] = await boss.fetch(queue, { batchSize: 1 });
    if (job === undefined) return undefined;
    return this.run(job as PgBossJob<T>, fetchedAt);
  }

  private run(job: PgBossJob<T>, fetchedAt: number): Promise<AttemptResult<R>> {
    const { boss, queue, fence } = this.o;
    const attempt = { id: job.id, retryCount: job.retryCount };
    // The queue's deadline: heartbeats, if the queue has them, else the job's run-time limit.
    const queueMs = (job.heartbeatSeconds ?? job.expireInSeconds) * 1000;
    const ttlMs = Math.min(this.ttlMs ?? MAX_TTL_MS, queueMs);
    const scope = `${this.keyPrefix}${queue}/${job.id}`;
    return runAttempt<PgBossJob<T>, R>({
      client: this.o.client,
      fence,
      queue,
      jobId: job.id,
      job,
      scope,
      ttlMs,
      waitMs: this.waitMs ?? ttlMs,
      heartbeatMs: Math.floor(ttlMs / 3),
      queueDeadline: fetchedAt + job.expireInSeconds * 1000,
      handler: this.o.handler,
      stopSignal: this.stopping.signal,
      logger: this.logger,
      onOutcome: this.o.onOutcome,
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
