import type { AcquireAsk, ClientContext } from './client-context.js';
import { LeaseholdError } from './errors.js';
import type { BusyAnswer, HeldLeases } from './held-leases.js';
import { leaseIdPrefix, newLeaseId } from './ids.js';
import type { AcquireResult } from './results.js';
import { boundedRequest, isProgrammerError } from './runtime/request.js';
import type { StoreAcquireRequest, StoreAcquireResult } from './store.js';

// Asking the store for a grant, and what its answers become. Every way of acquiring (one
// try, the store's own queue, a hand-off) builds its request and reads its answer here, so
// the rules — the timeout no longer than the usable window, a late grant released, the
// events — are written once.

/** One try at the store: an answer for the caller, or busy (the caller may wait). */
export type AttemptOutcome =
  | { readonly kind: 'done'; readonly result: AcquireResult }
  | { readonly kind: 'busy'; readonly busy: BusyAnswer };

/**
 * Asks the store once for `ask.key`, under a timeout no longer than the lease's usable
 * window; a grant becomes a lease through `held`. A grant nobody will see (timed out,
 * aborted, too late to leave any validity) is released. Throws the client's abort error
 * when `signal` fires, and programmer errors as they are.
 */
export async function attemptAcquire(
  ctx: ClientContext,
  held: HeldLeases,
  ask: AcquireAsk,
  signal: AbortSignal,
  startedAt: number,
): Promise<AttemptOutcome> {
  const leaseId = newLeaseId();
  const request = storeAcquireRequest(ctx, ask, leaseId);
  const sentAt = ctx.guard.now();
  const settled = await boundedRequest(
    ctx.timeouts,
    grantTimeoutMs(ctx, ask),
    signal,
    (o) => ctx.store.tryAcquire(request, o),
    (late) => releaseLateGrant(ctx, ask.key, leaseId, late),
  );
  if (!settled.ok) {
    if (settled.aborted) throw ctx.abortError(signal);
    if (isProgrammerError(settled.error)) throw settled.error;
    return { kind: 'done', result: unavailableResult(ctx, ask.key, settled.error) };
  }
  const answer = settled.value;
  if (answer.status === 'busy') return { kind: 'busy', busy: answer };
  const lease = held.admit(ask, leaseId, answer.token, sentAt, startedAt);
  if (lease === undefined) {
    return {
      kind: 'done',
      result: tooLate(ctx, ask.key, leaseId, answer, ctx.guard.now() - sentAt),
    };
  }
  return { kind: 'done', result: { status: 'acquired', lease, waitedMs: 0 } };
}

/** An answer later than the lease's usable window is worthless, so wait no longer than that. */
export function grantTimeoutMs(ctx: ClientContext, ask: AcquireAsk): number {
  return Math.max(1, Math.min(ctx.requestTimeoutMs, ask.ttlMs - ask.driftMs));
}

/** The store request for one acquisition, with the token block when local succession is on. */
export function storeAcquireRequest(
  ctx: ClientContext,
  ask: AcquireAsk,
  leaseId: string,
): StoreAcquireRequest {
  const r: StoreAcquireRequest = {
    key: ask.key,
    leaseId,
    ownerId: ctx.ownerId,
    ttlMs: ask.ttlMs,
    value: ask.value,
    ...(ctx.tokenBlock > 1 ? { tokenBlock: ctx.tokenBlock } : {}),
    ...(ask.lockDelayMs !== undefined ? { lockDelayMs: ask.lockDelayMs } : {}),
    ...(ask.ignoreLockDelay === true ? { ignoreLockDelay: true } : {}),
  };
  return r;
}

/**
 * A grant that arrived too late to leave any validity (`lateMs` after the request that
 * proved it was sent): released, and answered `unavailable`.
 */
export function tooLate(
  ctx: ClientContext,
  key: string,
  leaseId: string,
  grant: StoreAcquireResult,
  lateMs: number,
): AcquireResult {
  releaseLateGrant(ctx, key, leaseId, Promise.resolve(grant));
  return unavailableResult(
    ctx,
    key,
    new LeaseholdError(
      'ERR_UNAVAILABLE',
      `the grant arrived after the lease's local deadline (${Math.round(lateMs)}ms)`,
    ),
  );
}

/** A grant the caller will never see (timed out, aborted, too late) is released, not leaked. */
export function releaseLateGrant(
  ctx: ClientContext,
  key: string,
  leaseId: string,
  late: Promise<StoreAcquireResult>,
): void {
  late
    .then(
      async (answer) => {
        if (answer.status !== 'acquired') return;
        ctx.logger.info(
          {
            ownerId: ctx.ownerId,
            key,
            lease: leaseIdPrefix(leaseId),
            token: answer.token.toString(),
          },
          'releasing a grant that arrived too late',
        );
        await boundedRequest(ctx.timeouts, ctx.requestTimeoutMs, undefined, (o) =>
          ctx.store.release({ key, leaseId, token: answer.token }, o),
        );
      },
      () => undefined,
    )
    .catch(() => undefined);
}

/** The `unavailable` answer, reported as an event and a warning. */
export function unavailableResult(ctx: ClientContext, key: string, cause: unknown): AcquireResult {
  ctx.events.emit({ type: 'unavailable', key, ownerId: ctx.ownerId, cause });
  // No lease yet: owner and key name the acquisition that could not be answered.
  ctx.logger.warn({ ownerId: ctx.ownerId, key, err: String(cause) }, 'lease store unavailable');
  return { status: 'unavailable', cause };
}

/** The `busy` answer after waiting, reported as an event. */
export function busyResult(
  ctx: ClientContext,
  key: string,
  answer: BusyAnswer,
  waitedMs: number,
): AcquireResult {
  ctx.events.emit({ type: 'busy', key, ownerId: ctx.ownerId, holder: answer.holder, waitedMs });
  const busy = {
    status: 'busy',
    holder: answer.holder,
    retryAfterMs: answer.retryAfterMs,
  } as const;
  return answer.reason === 'lock_delay' ? { ...busy, reason: 'lock_delay' } : busy;
}
