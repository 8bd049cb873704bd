import type { AcquireAsk, ClientContext } from './client-context.js';
import type { BusyAnswer, HeldLeases } from './held-leases.js';
import { newLeaseId } from './ids.js';
import type { AcquireResult } from './results.js';
import { boundedRequest, isProgrammerError } from './runtime/request.js';

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
  const sentAt = ctx.guard.now();
  const settled = await boundedRequest(
    ctx.timeouts,
    ctx.grantTimeoutMs(ask),
    signal,
    (o) => ctx.store.tryAcquire(ctx.storeRequest(ask, leaseId), o),
    (late) => ctx.releaseLateGrant(ask.key, leaseId, late),
  );
  if (!settled.ok) {
    if (settled.aborted) throw ctx.abortError(signal);
    if (isProgrammerError(settled.error)) throw settled.error;
    return { kind: 'done', result: ctx.unavailable(ask.key, settled.error) };
  }
  const answer = settled.value;
  if (answer.status === 'busy') return { kind: 'busy', busy: answer };
  const lease = held.admit(ask, leaseId, answer.token, sentAt, startedAt);
  if (lease === undefined) {
    return {
      kind: 'done',
      result: ctx.tooLate(ask.key, leaseId, answer, ctx.guard.now() - sentAt),
    };
  }
  return { kind: 'done', result: { status: 'acquired', lease, waitedMs: 0 } };
}
