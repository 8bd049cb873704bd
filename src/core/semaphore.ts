import { attemptAcquire, busyResult } from './acquire-attempt.js';
import type { ClientContext } from './client-context.js';
import {
  resolveAcquire,
  type AcquireOptions,
  type ResolvedAcquire,
  type WithLeaseResult,
} from './client-options.js';
import type { BusyAnswer, HeldLeases } from './held-leases.js';
import type { Lease } from './lease.js';
import type { AcquireResult, ClaimFailedResult } from './results.js';
import { boundedRequest } from './runtime/request.js';
import { Wakeup } from './runtime/wakeup.js';
import { slotKey } from './slot-keys.js';
import type { Unwatch } from './store.js';
import { validateKey, validateLimit, validateSemaphoreName } from './validate.js';

// A semaphore of N slots is N ordinary keys, `name#slot=0` … `name#slot=N−1` (decision 046):
// taking a slot is taking one free key of them, so every store serves semaphores with the
// operations it already has, and each slot has its own token counter for fencing.

/** Options of one {@link LeaseClient.acquireSlot}: those of `acquire`, and the slot count. */
export interface AcquireSlotOptions extends AcquireOptions {
  /**
   * How many holders the semaphore admits at once (1–1024): slots `0 … limit − 1`. Every
   * caller of one semaphore should pass the same limit; a smaller one only uses fewer slots.
   */
  readonly limit: number;
}

/** {@link AcquireSlotOptions} that name no fences: the answer cannot be `claim_failed`. */
export type AcquireSlotOptionsWithoutFences = AcquireSlotOptions & { readonly fences?: undefined };

/** A lease on one slot of a semaphore: a {@link Lease} whose `slot` and `semaphore` are set. */
export type SlotLease = Lease & { readonly slot: number; readonly semaphore: string };

/** The outcome of {@link LeaseClient.acquireSlot}: as `acquire`'s, with a {@link SlotLease}. */
export type SlotAcquireResult =
  | { readonly status: 'acquired'; readonly lease: SlotLease; readonly waitedMs: number }
  | Exclude<AcquireResult, { status: 'acquired' }>;

/** The outcome of `acquireSlot` with `fences`: it may also be `claim_failed`. */
export type FencedSlotAcquireResult = SlotAcquireResult | ClaimFailedResult;

/** The outcome of {@link LeaseClient.withSlot}. */
export type WithSlotResult<T> = WithLeaseResult<T>;

/** One slot acquisition, checked: the semaphore, its limit, and the ask every slot shares. */
export interface ResolvedSlotAcquire {
  readonly name: string;
  readonly limit: number;
  /** The ask for slot 0; the ask for slot i differs only in its key. */
  readonly base: ResolvedAcquire;
}

/** Checks an `acquireSlot` call; throws `ERR_INVALID_ARGUMENT` before anything is sent. */
export function resolveSlotAcquire(
  name: unknown,
  options: AcquireSlotOptions,
  ctx: ClientContext,
): ResolvedSlotAcquire {
  const n = validateSemaphoreName(name);
  const limit = validateLimit((options as { limit?: unknown } | undefined)?.limit);
  const base = resolveAcquire(slotKey(n, 0), options, ctx.store, ctx.driftRatio, (k) =>
    validateKey(k, 'name'),
  );
  return { name: n, limit, base };
}

/**
 * Takes one free slot: tries the slots one after the other, from a random one on, so that
 * callers spread over the slots instead of all asking for slot 0 first; the first grant
 * wins. When every slot is busy and `wait` allows, it watches every slot's key and tries
 * again on each release or expiry it is told of, at the earliest expiry a busy answer
 * names, and at the backstop poll. Waiters of different processes are not queued: whoever
 * tries first after a release gets the slot.
 */
export async function acquireSlot(
  ctx: ClientContext,
  held: HeldLeases,
  req: ResolvedSlotAcquire,
  signal: AbortSignal,
  startedAt: number,
): Promise<AcquireResult> {
  const until = startedAt + req.base.waitMs;
  const wakeup = new Wakeup(ctx.clock);
  let unwatches: Unwatch[] | undefined;
  try {
    for (;;) {
      if (signal.aborted) throw ctx.abortError(signal);
      const pass = await tryEverySlot(ctx, held, req, signal, startedAt);
      if (pass.kind === 'done') {
        const { result } = pass;
        if (result.status !== 'acquired') return result;
        return { ...result, waitedMs: ctx.guard.now() - startedAt };
      }
      const now = ctx.guard.now();
      if (now >= until) {
        return busyResult(ctx, pass.key, pass.busy, now - startedAt);
      }
      if (unwatches === undefined) {
        // Re-check once the watches are live, so a release in between is not missed.
        unwatches = await watchSlots(ctx, req, wakeup.notify);
        continue;
      }
      const poll = Math.floor(ctx.pollIntervalMs * (0.8 + 0.4 * ctx.random()));
      const atExpiry = pass.busy.retryAfterMs + 1 + Math.floor(ctx.random() * 5);
      const sleep = Math.max(1, Math.min(until - now, poll, atExpiry));
      if ((await wakeup.wait(sleep, signal)) === 'aborted') throw ctx.abortError(signal);
    }
  } finally {
    for (const unwatch of unwatches ?? []) unwatch();
  }
}

/** One pass over the slots: a grant (or an answer) or the busy slot that frees soonest. */
async function tryEverySlot(
  ctx: ClientContext,
  held: HeldLeases,
  req: ResolvedSlotAcquire,
  signal: AbortSignal,
  startedAt: number,
): Promise<
  | { readonly kind: 'done'; readonly result: AcquireResult }
  | { readonly kind: 'busy'; readonly key: string; readonly busy: BusyAnswer }
> {
  const start = Math.floor(ctx.random() * req.limit) % req.limit;
  let soonest: { key: string; busy: BusyAnswer } | undefined;
  let unavailable: AcquireResult | undefined;
  for (let i = 0; i < req.limit; i++) {
    const key = slotKey(req.name, (start + i) % req.limit);
    const attempt = await attemptAcquire(ctx, held, { ...req.base, key }, signal, startedAt);
    if (attempt.kind === 'busy') {
      if (soonest === undefined || attempt.busy.retryAfterMs < soonest.busy.retryAfterMs) {
        soonest = { key, busy: attempt.busy };
      }
      continue;
    }
    if (attempt.result.status === 'acquired') return { kind: 'done', result: attempt.result };
    unavailable = attempt.result;
  }
  // Some slots busy, others unreachable: waiting may still get a reachable one.
  if (soonest !== undefined) return { kind: 'busy', ...soonest };
  return { kind: 'done', result: unavailable! };
}

/** Watches every slot's key; a failed watch leaves waiting to the expiry timer and the poll. */
async function watchSlots(
  ctx: ClientContext,
  req: ResolvedSlotAcquire,
  notify: () => void,
): Promise<Unwatch[]> {
  const onChange = (change?: string): void => {
    // A grant leaves the slot held: nothing to try for.
    if (change !== 'granted') notify();
  };
  const settled = await Promise.all(
    Array.from({ length: req.limit }, (_, i) =>
      boundedRequest(ctx.timeouts, ctx.requestTimeoutMs, ctx.closeSignal, () =>
        ctx.store.watch(slotKey(req.name, i), onChange),
      ),
    ),
  );
  const unwatches: Unwatch[] = [];
  for (const s of settled) {
    if (s.ok) unwatches.push(s.value);
    else if (!s.aborted) {
      ctx.logger.warn(
        { semaphore: req.name, err: String(s.error) },
        'watch failed; waiting for a slot by expiry timer and poll',
      );
    }
  }
  return unwatches;
}
