import {
  busyResult,
  grantTimeoutMs,
  releaseLateGrant,
  storeAcquireRequest,
  tooLate,
  unavailableResult,
} from './acquire-attempt.js';
import type { ClientContext } from './client-context.js';
import type { ResolvedAcquire } from './client-options.js';
import { LeaseholdError } from './errors.js';
import { checkToken, type HeldLeases } from './held-leases.js';
import { newLeaseId } from './ids.js';
import type { AcquireResult } from './results.js';
import { boundedRequest, isProgrammerError } from './runtime/request.js';
import type { LeaseStore, QueueingLeaseStore } from './store.js';

/**
 * Waiting on a store that keeps the queue itself ({@link QueueingLeaseStore}): one call
 * that the store answers when the key is ours or the wait is over. The lease's deadline
 * is measured from the store's `validFrom`, a reading of our clock taken before the
 * request that proved the lease valid.
 */
export async function acquireQueued(
  ctx: ClientContext,
  held: HeldLeases,
  store: LeaseStore & QueueingLeaseStore,
  req: ResolvedAcquire,
  signal: AbortSignal,
  startedAt: number,
): Promise<AcquireResult> {
  if (signal.aborted) throw ctx.abortError(signal);
  const leaseId = newLeaseId();
  const calledAt = ctx.guard.now();
  const waitMs = Math.max(0, startedAt + req.waitMs - calledAt);
  // A round trip answered later than the lease's usable window is worthless.
  const requestTimeoutMs = grantTimeoutMs(ctx, req);
  // The store ends the wait itself; the slack covers its final check and clean-up.
  const settled = await boundedRequest(
    ctx.timeouts,
    waitMs + 3 * requestTimeoutMs,
    signal,
    (o) =>
      store.acquireQueued(storeAcquireRequest(ctx, req, leaseId), {
        timeoutMs: waitMs,
        signal: o.signal,
        requestTimeoutMs,
        now: () => ctx.guard.now(),
        pollIntervalMs: ctx.pollIntervalMs,
      }),
    (late) => releaseLateGrant(ctx, req.key, leaseId, late),
  );
  if (!settled.ok) {
    if (settled.aborted || signal.aborted) throw ctx.abortError(signal);
    if (isProgrammerError(settled.error)) throw settled.error;
    return unavailableResult(ctx, req.key, settled.error);
  }
  const answer = settled.value;
  const now = ctx.guard.now();
  if (answer.status === 'busy') return busyResult(ctx, req.key, answer, now - startedAt);
  try {
    checkToken(ctx, answer.token);
  } catch (err) {
    releaseLateGrant(ctx, req.key, leaseId, Promise.resolve(answer));
    throw err;
  }
  const validFrom = answer.validFrom;
  if (typeof validFrom !== 'number' || !(validFrom >= calledAt && validFrom <= now)) {
    releaseLateGrant(ctx, req.key, leaseId, Promise.resolve(answer));
    throw new LeaseholdError(
      'ERR_PROTOCOL',
      `store ${store.kind} answered validFrom ${String(validFrom)} outside its call [${calledAt}, ${now}]`,
    );
  }
  const lease = held.admit(req, leaseId, answer.token, validFrom, startedAt);
  if (lease === undefined) return tooLate(ctx, req.key, leaseId, answer, now - validFrom);
  return { status: 'acquired', lease, waitedMs: now - startedAt };
}
