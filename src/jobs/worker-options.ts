import type { LeaseClient } from '../core/client.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { invalidArgument } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/events.js';
import { validateKey } from '../core/validate.js';
import type { AttemptOutcome } from './attempt-result.js';
import type { JobHandler } from './attempt.js';
import type { PeriodOf } from './period.js';

/** The options every fenced queue worker takes, besides its queue's own objects and fence. */
export interface FencedWorkerOptions<J, R> {
  /** The queue to work. */
  readonly queue: string;
  /** The lease client whose store issues the attempt tokens (any leasehold store). */
  readonly client: LeaseClient;
  /** Runs one attempt; its value completes the job, a throw fails it. */
  readonly handler: JobHandler<J, R>;
  /**
   * The attempt lease's TTL. Never longer than the queue's own deadline for the job (pg-boss:
   * `heartbeatSeconds`, else `expireInSeconds`; BullMQ: `lockDuration`): a longer one is cut
   * to it. Defaults to that deadline, at most `30s`.
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
  /**
   * Which schedule and period fired a job, for one completed run per period: the job's lease
   * key and fence scope become the schedule's (`<keyPrefix><queue>/schedules/<schedule>`), and
   * a run whose period, or a newer one, is already done completes without running (docs/jobs.md,
   * "Scheduled jobs"). BullMQ and graphile-worker read it from the job by default; pg-boss does
   * not put it on the job, so give one there. `false` runs scheduled jobs as plain jobs.
   */
  readonly periodOf?: PeriodOf<J> | false;
}

/** {@link FencedWorkerOptions}, checked, durations in ms. */
export interface ResolvedWorkerOptions<J, R> {
  readonly queue: string;
  readonly client: LeaseClient;
  readonly handler: JobHandler<J, R>;
  readonly ttlMs: number | undefined;
  readonly waitMs: number | undefined;
  readonly keyPrefix: string;
  readonly pollMs: number;
  readonly concurrency: number;
  readonly logger: Logger;
  readonly onOutcome: ((outcome: AttemptOutcome) => void) | undefined;
}

/** The longest attempt TTL unless `ttl` says otherwise. */
export const MAX_DEFAULT_TTL_MS = 30_000;

/** Checks {@link FencedWorkerOptions}; throws `ERR_INVALID_ARGUMENT` naming the field. */
export function resolveWorkerOptions<J, R>(
  o: FencedWorkerOptions<J, R>,
): ResolvedWorkerOptions<J, R> {
  if (typeof o !== 'object' || o === null) throw invalidArgument('options', 'must be an object', o);
  if (typeof o.queue !== 'string' || o.queue === '')
    throw invalidArgument('queue', 'must be a non-empty string', o.queue);
  if (typeof o.handler !== 'function')
    throw invalidArgument('handler', 'must be a function', o.handler);
  if (typeof o.client?.acquire !== 'function')
    throw invalidArgument('client', 'must be a LeaseClient', o.client);
  const keyPrefix = o.keyPrefix ?? 'jobs/';
  validateKey(`${keyPrefix}${o.queue}/x`, 'keyPrefix');
  const concurrency = o.concurrency ?? 1;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > 256)
    throw invalidArgument('concurrency', 'must be a whole number from 1 to 256', concurrency);
  return {
    queue: o.queue,
    client: o.client,
    handler: o.handler,
    ttlMs: o.ttl === undefined ? undefined : parseDuration('ttl', o.ttl),
    waitMs: o.wait === undefined ? undefined : parseDuration('wait', o.wait),
    keyPrefix,
    pollMs: parseDuration('pollInterval', o.pollInterval ?? '1s'),
    concurrency,
    logger: o.logger ?? silentLogger,
    onOutcome: o.onOutcome,
  };
}
