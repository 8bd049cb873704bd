import { invalidArgument } from '../core/errors.js';
import type { ClaimTarget } from '../core/fence-claim.js';
import { validateKey } from '../core/validate.js';

/**
 * One period of a schedule: which schedule fired the job, and when the period starts. Two jobs
 * of one schedule and period are one run: whichever completes first counts, the other finds the
 * period done. A run of an older period, once a newer period's run has completed, is refused.
 */
export interface SchedulePeriod {
  /**
   * The schedule's name, the same in every install that fires it (BullMQ: the job scheduler's
   * id; graphile-worker: the task identifier; pg-boss: yours to give). Same rules as a key part.
   */
  readonly schedule: string;
  /** The period's start, in milliseconds since the epoch (UTC): a whole number, at least 1. */
  readonly start: number;
}

/**
 * Reads a job's schedule period, or `undefined` for a job no schedule fired (run as a plain
 * fenced attempt). Must give the same answer for every job of the same run, whichever install
 * of the queue made it.
 */
export type PeriodOf<J> = (job: J) => SchedulePeriod | undefined;

/** A fence that can also read a scope's mark: period runs keep the latest period there. */
export interface PeriodFence extends ClaimTarget {
  highWaterMark(scope: string): Promise<bigint>;
}

/** Whether `fence` can keep period marks (`PostgresFence` and `RedisFence` can). */
export function canKeepPeriods(fence: ClaimTarget): fence is PeriodFence {
  return typeof (fence as Partial<PeriodFence>).highWaterMark === 'function';
}

/** What the attempt runner needs for a job that is a schedule's run. */
export interface PeriodPlan {
  readonly fence: PeriodFence;
  /** The period's start as the mark it raises. */
  readonly start: bigint;
  /** The fence scope whose mark is the start of the latest period whose run completed. */
  readonly markScope: string;
}

/** The lease key and fence scope of a schedule's runs, and the scope of its period mark. */
export function scheduleScopes(
  keyPrefix: string,
  queue: string,
  period: SchedulePeriod,
): { scope: string; markScope: string; start: bigint } {
  if (typeof period !== 'object' || period === null)
    throw invalidArgument('periodOf', 'must answer { schedule, start } or undefined', period);
  if (typeof period.schedule !== 'string' || period.schedule === '')
    throw invalidArgument('periodOf', 'schedule must be a non-empty string', period.schedule);
  if (!Number.isSafeInteger(period.start) || period.start < 1)
    throw invalidArgument(
      'periodOf',
      'start must be a whole number of ms, at least 1',
      period.start,
    );
  // `/schedules/` keeps a schedule's scope apart from every job's (`<queue>/<job id>`) unless a
  // job id holds a slash and that very word.
  const scope = validateKey(`${keyPrefix}${queue}/schedules/${period.schedule}`, 'periodOf');
  return { scope, markScope: `${scope}/period`, start: BigInt(period.start) };
}

/** Where a period stands for a run about to start, or about to report. */
export type PeriodStanding =
  | { readonly status: 'open' }
  | { readonly status: 'period_done' | 'period_passed'; readonly latestPeriod: bigint };

/** Reads the mark: this period already ran (`period_done`), a newer one did, or it is open. */
export async function periodStanding(plan: PeriodPlan): Promise<PeriodStanding> {
  const latest = await plan.fence.highWaterMark(plan.markScope);
  return standing(plan.start, latest);
}

/**
 * Marks the period done: raises the mark to its start. Refused when a newer period's run has
 * completed (`period_passed`); under the `>` policy an equal mark is refused too, which means
 * another run of this period completed first (`period_done`).
 */
export async function markPeriodDone(plan: PeriodPlan): Promise<PeriodStanding> {
  const r = await plan.fence.claim(plan.markScope, plan.start);
  if (r.status === 'applied') return { status: 'open' };
  return standing(plan.start, r.highWaterMark);
}

function standing(start: bigint, latest: bigint): PeriodStanding {
  if (start > latest) return { status: 'open' };
  return { status: start === latest ? 'period_done' : 'period_passed', latestPeriod: latest };
}

/** BullMQ's job scheduler (and legacy repeatable) job id: `repeat:<scheduler id>:<millis>`. */
const BULLMQ_REPEAT_ID = /^repeat:.+:(\d+)$/;

/**
 * The period of a job made by a BullMQ job scheduler (`upsertJobScheduler`) or repeatable:
 * the scheduler's id (`repeatJobKey`) and the millis BullMQ put in the job's id, the instant it
 * was due. `undefined` for a job no scheduler made.
 */
export function bullMqPeriod(job: {
  readonly id?: string | undefined;
  readonly repeatJobKey?: string | undefined;
}): SchedulePeriod | undefined {
  const key = job.repeatJobKey;
  const m = job.id === undefined ? null : BULLMQ_REPEAT_ID.exec(job.id);
  if (key === undefined || key === '' || m === null) return undefined;
  return { schedule: key, start: Number(m[1]) };
}

/**
 * The period of a graphile-worker crontab job: the task identifier and the `_cron.ts` timestamp
 * graphile-worker puts in the payload (the minute the crontab fired for, backfilled or not).
 * `undefined` for a job without it.
 */
export function graphileCronPeriod(
  taskIdentifier: string,
  payload: unknown,
): SchedulePeriod | undefined {
  const cron = (payload as { _cron?: { ts?: unknown } } | null)?._cron;
  if (typeof cron?.ts !== 'string') return undefined;
  const start = Date.parse(cron.ts);
  if (!Number.isSafeInteger(start) || start < 1) return undefined;
  return { schedule: taskIdentifier, start };
}

/**
 * The `periodOf` a worker uses: the user's function, none for `false`, else the queue's own
 * reading of its schedule metadata when the fence can keep period marks.
 */
export function resolvePeriodOf<J>(
  option: PeriodOf<J> | false | undefined,
  queueDefault: PeriodOf<J> | undefined,
  fence: ClaimTarget,
): PeriodOf<J> | undefined {
  if (option === false) return undefined;
  if (option === undefined) return canKeepPeriods(fence) ? queueDefault : undefined;
  if (typeof option !== 'function')
    throw invalidArgument('periodOf', 'must be a function or false', option);
  if (!canKeepPeriods(fence))
    throw invalidArgument('fence', 'must have highWaterMark(scope) to keep periods', fence);
  return option;
}

/** A job's lease key and fence scope, and its period plan when a schedule fired it. */
export function attemptScopes<J>(
  keyPrefix: string,
  queue: string,
  jobId: string,
  job: J,
  periodOf: PeriodOf<J> | undefined,
  fence: ClaimTarget,
): { scope: string; period: PeriodPlan | undefined } {
  const period = periodOf?.(job);
  if (period === undefined || !canKeepPeriods(fence))
    return { scope: `${keyPrefix}${queue}/${jobId}`, period: undefined };
  const s = scheduleScopes(keyPrefix, queue, period);
  return { scope: s.scope, period: { fence, start: s.start, markScope: s.markScope } };
}
