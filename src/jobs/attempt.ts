import type { LeaseClient } from '../core/client.js';
import type { Logger } from '../core/events.js';
import type { ClaimTarget } from '../core/fence-claim.js';
import type { Lease } from '../core/lease.js';
import type { Token } from '../core/types.js';
import type { AttemptAbortReason, AttemptOutcome, AttemptResult } from './attempt-result.js';
import { markPeriodDone, periodStanding, type PeriodPlan } from './period.js';

/** What a fenced job handler receives for one attempt of one job. */
export interface JobAttemptContext<J> {
  /** The job as the queue handed it to this worker. */
  readonly job: J;
  /**
   * The attempt's fencing token: greater than the token of every earlier attempt of this job.
   * Pass it with every write the attempt makes (any leasehold fence), on {@link scope} or a
   * scope of your own, so a later attempt's writes cannot be overwritten by this one.
   */
  readonly token: Token;
  /**
   * The job's lease key and fence scope (`jobs/<queue>/<job id>`). The attempt's token is
   * claimed on it before the handler runs, so an earlier attempt's write there is refused even
   * before this attempt writes.
   */
  readonly scope: string;
  /**
   * Fires when the attempt should stop: its lease was lost, the queue took the job back, or
   * the worker is stopping. `signal.reason` is an {@link AttemptAbortReason}.
   */
  readonly signal: AbortSignal;
}

/** A handler of fenced attempts: its return value completes the job, a throw fails it. */
export type JobHandler<J, R> = (attempt: JobAttemptContext<J>) => Promise<R> | R;

/** The queue's answer to a fenced report. */
export type ReportAnswer =
  | { readonly status: 'recorded' }
  | { readonly status: 'stale_fence'; readonly highWaterMark: bigint }
  | { readonly status: 'not_active' };

/** What one queue adapter supplies to run one attempt. */
export interface AttemptPlan<J, R> {
  readonly client: LeaseClient;
  readonly fence: ClaimTarget;
  readonly queue: string;
  readonly jobId: string;
  readonly job: J;
  readonly scope: string;
  readonly ttlMs: number;
  readonly waitMs: number;
  /** How often the queue's claim is extended (and the lease renewed). */
  readonly heartbeatMs: number;
  /**
   * Monotonic time (the client's `now()`) at which the queue takes the job back whatever the
   * heartbeats say (pg-boss `expireInSeconds`), measured from before the job was fetched.
   */
  readonly queueDeadline: number | undefined;
  readonly handler: JobHandler<J, R>;
  /** Set when the job is a schedule's run: one completed run per period (decision 040). */
  readonly period?: PeriodPlan | undefined;
  readonly stopSignal: AbortSignal;
  readonly logger: Logger;
  readonly onOutcome: ((outcome: AttemptOutcome) => void) | undefined;
  /** Extends the queue's claim; false when the queue no longer holds this attempt. */
  heartbeat(): Promise<boolean>;
  /** Reports the outcome, fenced by `token` in the same step as the queue's state change. */
  report(kind: 'complete' | 'fail', payload: unknown, token: Token): Promise<ReportAnswer>;
  /** Hands the attempt back to the queue as failed (fenced by the queue's own attempt check). */
  giveBack(why: string): Promise<void>;
}

/** Runs one attempt of one job under a lease on the job's scope; see {@link AttemptResult}. */
export async function runAttempt<J, R>(plan: AttemptPlan<J, R>): Promise<AttemptResult<R>> {
  const result = await attempt(plan);
  tell(plan, result);
  return result;
}

async function attempt<J, R>(plan: AttemptPlan<J, R>): Promise<AttemptResult<R>> {
  let acquired;
  try {
    acquired = await plan.client.acquire(plan.scope, {
      ttl: plan.ttlMs,
      wait: plan.waitMs,
      renewEvery: plan.heartbeatMs,
      signal: plan.stopSignal,
    });
  } catch (cause) {
    return { status: 'unavailable', cause };
  }
  switch (acquired.status) {
    case 'acquired':
      return started(plan, acquired.lease);
    case 'busy':
      await giveBack(plan, 'an earlier attempt still holds the job lease');
      return { status: 'lease_busy', retryAfterMs: acquired.retryAfterMs };
    case 'unavailable':
      return { status: 'unavailable', cause: acquired.cause };
  }
}

/**
 * Between the fetch and the grant this attempt may have been paused while the queue handed the
 * job to a newer attempt, which may even have finished and released the key: the grant would
 * then give the stale attempt the higher token. So the queue is asked, while the lease is held,
 * whether it still holds this attempt; only then is the token claimed on the job's scope. Any
 * later attempt needs this lease gone first, so its token is higher (decision 036).
 */
async function started<J, R>(plan: AttemptPlan<J, R>, lease: Lease): Promise<AttemptResult<R>> {
  const token = lease.token;
  try {
    if (!(await plan.heartbeat())) {
      await lease.release().catch(() => undefined);
      return { status: 'not_active', token, report: 'start' };
    }
    // Under the lease, runs of the schedule are serialized: one that finds its period (or a
    // newer one) done completes the job without running the handler.
    if (plan.period !== undefined) {
      const standing = await periodStanding(plan.period);
      if (standing.status !== 'open') return await skipPeriod(plan, lease, standing);
    }
    // Claim before start: an earlier attempt's write to the job's scope is refused from here
    // on, even before this attempt's first write.
    const claimed = await plan.fence.claim(plan.scope, token);
    if (claimed.status === 'stale_fence') {
      await lease.release().catch(() => undefined);
      await giveBack(plan, 'a newer attempt has claimed the job');
      return { status: 'superseded', token, highWaterMark: claimed.highWaterMark };
    }
  } catch (cause) {
    await lease.release().catch(() => undefined);
    return { status: 'unavailable', cause };
  }
  return underLease(plan, lease);
}

/**
 * After the attempt's lease was lost while the queue still held the attempt: claims a fresh
 * token of the job's key on its scope, so the lost attempt's writes and report are refused from
 * now on, not only once the queue's next attempt claims; then hands the job back to the queue.
 * A key already held by someone else (a newer attempt) needs no claim: its holder claims. A store
 * that cannot answer leaves the claim to the next attempt; the hand-back is made anyway.
 */
async function fenceOut<J, R>(plan: AttemptPlan<J, R>, lost: Lease): Promise<void> {
  try {
    const next = await plan.client.acquire(plan.scope, { ttl: plan.ttlMs });
    if (next.status === 'acquired') {
      try {
        await plan.fence.claim(plan.scope, next.lease.token);
      } finally {
        await next.lease.release().catch(() => undefined);
      }
    }
  } catch (err) {
    plan.logger.warn(
      { queue: plan.queue, jobId: plan.jobId, token: lost.token.toString(), err },
      'could not fence out a job attempt whose lease was lost',
    );
  }
  await giveBack(plan, 'the attempt lease was lost');
}

async function giveBack<J, R>(plan: AttemptPlan<J, R>, why: string): Promise<void> {
  try {
    await plan.giveBack(why);
  } catch (err) {
    // The queue's own deadline retries the job when this report cannot be made.
    plan.logger.warn({ queue: plan.queue, jobId: plan.jobId, err }, 'job give-back failed');
  }
}

async function underLease<J, R>(plan: AttemptPlan<J, R>, lease: Lease): Promise<AttemptResult<R>> {
  const token = lease.token;
  const stop = new AbortController();
  const abort = (reason: AttemptAbortReason) => {
    if (!stop.signal.aborted) stop.abort(reason);
  };
  // The lease ends first (revoked, expired, or its renewal refused) while the queue may still
  // hold this attempt: the earlier deadline wins, so the attempt is fenced out and handed back.
  let fencedOut: Promise<void> | undefined;
  const onLeaseLost = () => {
    if (stop.signal.aborted || lease.status !== 'lost') return;
    abort('lease_lost');
    fencedOut = fenceOut(plan, lease);
  };
  const onStopping = () => abort('stopping');
  if (lease.signal.aborted) onLeaseLost();
  lease.signal.addEventListener('abort', onLeaseLost, { once: true });
  if (plan.stopSignal.aborted) onStopping();
  plan.stopSignal.addEventListener('abort', onStopping, { once: true });
  // The queue has handed (or will hand) the job to another attempt: free the job's key now so
  // that attempt need not wait out this lease. This handler may still run; the newer attempt's
  // claim on the scope refuses its writes and its report.
  const tookBack = () => {
    abort('queue_took_back');
    void lease.release().catch(() => undefined);
  };
  const timers = startHeartbeat(plan, tookBack, stop.signal);
  try {
    let kind: 'complete' | 'fail';
    let payload: unknown;
    try {
      payload = await plan.handler({
        job: plan.job,
        token,
        scope: plan.scope,
        signal: stop.signal,
      });
      kind = 'complete';
    } catch (err) {
      payload = err;
      kind = 'fail';
    }
    timers.stop();
    // A lost lease's fence-out goes first, so the report meets it whatever the handler's timing.
    await fencedOut;
    if (kind === 'complete' && plan.period !== undefined) {
      const refused = await markDone(plan, plan.period, token);
      if (refused !== undefined) return refused;
    }
    // Reported whatever the signal says: the fence, not the local view, decides whether this
    // attempt is still the newest one (a lost lease that could not be fenced out, with no newer
    // attempt, still counts).
    let answer: ReportAnswer;
    try {
      answer = await plan.report(kind, payload, token);
    } catch (cause) {
      return { status: 'unavailable', cause };
    }
    switch (answer.status) {
      case 'recorded':
        return kind === 'complete'
          ? { status: 'completed', token, value: payload as R }
          : { status: 'failed', token, error: payload };
      case 'stale_fence':
        return {
          status: 'stale_attempt',
          token,
          report: kind,
          highWaterMark: answer.highWaterMark,
        };
      case 'not_active':
        return { status: 'not_active', token, report: kind };
    }
  } finally {
    timers.stop();
    lease.signal.removeEventListener('abort', onLeaseLost);
    plan.stopSignal.removeEventListener('abort', onStopping);
    await lease.release().catch(() => undefined);
  }
}

/** Completes a run whose period (or a newer one) is already done, without its handler. */
async function skipPeriod<J, R>(
  plan: AttemptPlan<J, R>,
  lease: Lease,
  standing: { status: 'period_done' | 'period_passed'; latestPeriod: bigint },
): Promise<AttemptResult<R>> {
  const token = lease.token;
  try {
    const answer = await plan.report('complete', null, token);
    switch (answer.status) {
      case 'recorded':
        return { status: standing.status, token, latestPeriod: standing.latestPeriod };
      case 'stale_fence':
        return {
          status: 'stale_attempt',
          token,
          report: 'complete',
          highWaterMark: answer.highWaterMark,
        };
      case 'not_active':
        return { status: 'not_active', token, report: 'complete' };
    }
  } finally {
    await lease.release().catch(() => undefined);
  }
}

/**
 * Before a run's completion is reported: checks that it is still the newest run of its
 * schedule, then raises the period mark, so a duplicate run of this period or a late run of an
 * older one finds it done. Answers the result to return instead of reporting, if any. A crash
 * between the mark and the report leaves the job to the queue's retry, which finds the period
 * done; a crash before the mark lets a duplicate run the period again, with a higher token.
 */
async function markDone<J, R>(
  plan: AttemptPlan<J, R>,
  period: PeriodPlan,
  token: Token,
): Promise<AttemptResult<R> | undefined> {
  try {
    const checked = await plan.fence.claim(plan.scope, token);
    if (checked.status === 'stale_fence')
      return {
        status: 'stale_attempt',
        token,
        report: 'complete',
        highWaterMark: checked.highWaterMark,
      };
    const marked = await markPeriodDone(period);
    if (marked.status === 'open') return undefined;
    await giveBack(plan, 'another run of the schedule completed first');
    return { status: marked.status, token, latestPeriod: marked.latestPeriod };
  } catch (cause) {
    return { status: 'unavailable', cause };
  }
}

/**
 * Extends the queue's claim every `heartbeatMs` while the handler runs, and fires `lapse` when
 * the queue refuses a heartbeat or its own deadline for the job passes.
 */
function startHeartbeat<J, R>(
  plan: AttemptPlan<J, R>,
  lapse: () => void,
  attemptSignal: AbortSignal,
): { stop(): void } {
  let stopped = false;
  let beat: ReturnType<typeof setTimeout> | undefined;
  let deadline: ReturnType<typeof setTimeout> | undefined;
  const next = () => {
    if (stopped || attemptSignal.aborted) return;
    beat = setTimeout(() => {
      plan.heartbeat().then(
        (held) => {
          if (!held && !stopped) lapse();
          else next();
        },
        (err: unknown) => {
          // Not a lapse: the queue's own deadline, or the lease, ends an attempt it cannot reach.
          plan.logger.warn({ queue: plan.queue, jobId: plan.jobId, err }, 'job heartbeat failed');
          next();
        },
      );
    }, plan.heartbeatMs);
  };
  next();
  if (plan.queueDeadline !== undefined) {
    deadline = setTimeout(lapse, Math.max(0, plan.queueDeadline - plan.client.now()));
  }
  return {
    stop() {
      stopped = true;
      if (beat !== undefined) clearTimeout(beat);
      if (deadline !== undefined) clearTimeout(deadline);
    },
  };
}

function tell<J, R>(plan: AttemptPlan<J, R>, result: AttemptResult<R>): void {
  const fields: Record<string, unknown> = {
    queue: plan.queue,
    jobId: plan.jobId,
    status: result.status,
    ...('token' in result ? { token: result.token.toString() } : {}),
  };
  if (result.status === 'stale_attempt') {
    fields['highWaterMark'] = result.highWaterMark.toString();
    plan.logger.warn(fields, `stale job attempt: its ${result.report} was refused`);
  } else if (result.status === 'period_done' || result.status === 'period_passed') {
    fields['latestPeriod'] = result.latestPeriod.toString();
    plan.logger.info(fields, `scheduled job not run: ${result.status}`);
  } else if (result.status === 'unavailable') {
    plan.logger.warn({ ...fields, err: result.cause }, 'job attempt could not be run or reported');
  } else {
    plan.logger.debug(fields, 'job attempt settled');
  }
  if (plan.onOutcome === undefined) return;
  try {
    plan.onOutcome({ queue: plan.queue, jobId: plan.jobId, scope: plan.scope, result });
  } catch (err) {
    plan.logger.warn({ err }, 'onOutcome threw');
  }
}
