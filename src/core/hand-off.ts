import { grantTimeoutMs, releaseLateGrant, storeAcquireRequest } from './acquire-attempt.js';
import type { ClientContext } from './client-context.js';
import type { BusyAnswer, HeldLeases } from './held-leases.js';
import { leaseIdPrefix, newLeaseId } from './ids.js';
import type { Waiter, WaitQueues } from './key-waiters.js';
import type { Lease } from './lease.js';
import type { ReleaseResult } from './results.js';
import { boundedRequest, isProgrammerError } from './runtime/request.js';
import { canHandOff, type HandOffLeaseStore } from './store.js';

/**
 * Passing a released key straight to a waiting acquisition of the same client: by local
 * succession (the next token of the store grant's block, no store call; decision 007) or,
 * when the store can, by one atomic release-and-acquire. It owns the one piece of state a
 * hand-off needs beyond the waiter's own: the lease whose key is in transfer right now.
 */
export class HandOffs {
  /** Leases released locally whose store lease passes to a waiter in one store call now. */
  private readonly inTransfer: Record<string, Lease> = Object.create(null) as Record<string, Lease>;

  constructor(
    private readonly ctx: ClientContext,
    private readonly held: HeldLeases,
    private readonly waiting: WaitQueues,
  ) {}

  /**
   * A busy answer made from this client's own live lease on `key`, if it holds one: while
   * it does, the store can only answer busy, so a waiting acquire joins the queue without
   * asking (its turn comes by hand-off).
   */
  localHolder(key: string): BusyAnswer | undefined {
    const live = this.held.onKey(key);
    // A lease being handed off is released locally but holds at the store until the hand-off
    // answers, and then its waiter holds: busy either way.
    const lease = live ?? this.inTransfer[key];
    if (lease === undefined) return undefined;
    const remainingMs = live === undefined ? lease.ttlMs : lease.remainingMs();
    if (remainingMs <= 0) return undefined;
    return {
      status: 'busy',
      holder: {
        ownerId: lease.ownerId,
        token: lease.token,
        remainingMs,
        leaseIdPrefix: leaseIdPrefix(lease.leaseId),
        value: lease.value,
      },
      retryAfterMs: remainingMs,
    };
  }

  /**
   * Called by a lease of this client as it is released, when another acquisition of this
   * client waits for the same key: the key goes to that waiter under the same store lease
   * with the next token of its block (local succession, no store call; a function to run once
   * the release is reported), or when the store can, in one atomic release-and-acquire.
   * Undefined means "release as usual".
   */
  offer(lease: Lease): Promise<ReleaseResult> | (() => void) | undefined {
    const { ctx } = this;
    if (ctx.maxHandOffRun === 0 || ctx.closed) return undefined;
    const spare = lease.blockEnd > lease.token;
    if (!spare && !canHandOff(ctx.store)) return undefined;
    const queue = this.waiting.get(lease.key);
    const waiter = queue?.claimHead(ctx.maxHandOffRun);
    if (queue === undefined || waiter === undefined) return undefined;
    if (spare) {
      const succeed = this.localSuccession(lease, waiter);
      if (succeed !== undefined) return succeed;
    }
    if (!canHandOff(ctx.store)) {
      queue.unclaim(waiter);
      return undefined;
    }
    this.inTransfer[lease.key] = lease;
    // Cleared a step after the answer, not before the waiter hears it: a waiter woken by a
    // failed hand-off first sees the key as still ours and waits, rather than ask at once.
    return this.transfer(ctx.store, lease, waiter).finally(() => {
      if (this.inTransfer[lease.key] === lease) delete this.inTransfer[lease.key];
    });
  }

  /**
   * The grant of `lease`'s next token to `waiter` under the same store lease, or undefined
   * when the waiter asked for another TTL or value (the store's record would not match), less
   * than half the lease's window is left (a store grant would give it a whole one), or the
   * waiter started waiting after the request that last proved the store lease live was sent.
   */
  private localSuccession(lease: Lease, waiter: Waiter): (() => void) | undefined {
    const req = waiter.request;
    if (req.ttlMs !== lease.ttlMs || req.value !== lease.value) return undefined;
    // The store lease was live at the store at some instant after `validFrom` (its grant or
    // last confirmed renewal was sent then). A waiter that began before `validFrom` may take
    // the next token: every acquisition that completed before it began was granted before
    // the store lease (or is an earlier holder of its block), so its token is smaller. A
    // later waiter may not: the store's clock can jump and expire the store lease at any
    // moment, and a larger token may already have been granted to someone else (decision
    // 007, "Clock faults"). Both readings are of this client's monotonic clock, so their
    // order is real-time order whatever any clock's rate; strict, because two equal readings
    // do not say which came first.
    if (!(waiter.startedAt < lease.validFrom)) return undefined;
    let now: number;
    try {
      now = this.ctx.guard.now();
    } catch {
      return undefined; // the clock misbehaved: no succession, the release goes to the store
    }
    if (lease.deadline - now < (req.ttlMs - req.driftMs) / 2) return undefined;
    return () => {
      const successor = this.held.admit(
        req,
        lease.leaseId,
        lease.token + 1n,
        lease.validFrom,
        waiter.startedAt,
        { storeToken: lease.storeToken, blockEnd: lease.blockEnd, grantedAt: now },
      );
      if (successor === undefined) {
        // Cannot happen within one synchronous step (half a window was left); never leak it.
        releaseLateGrant(
          this.ctx,
          req.key,
          lease.leaseId,
          Promise.resolve({ status: 'acquired', token: lease.storeToken }),
        );
      }
      waiter.deliver(successor);
    };
  }

  private async transfer(
    store: HandOffLeaseStore,
    from: Lease,
    waiter: Waiter,
  ): Promise<ReleaseResult> {
    const { ctx } = this;
    const req = waiter.request;
    const leaseId = newLeaseId();
    const sentAt = ctx.guard.now();
    const settled = await boundedRequest(
      ctx.timeouts,
      grantTimeoutMs(ctx, req),
      undefined,
      (o) =>
        store.releaseAndAcquire(
          { key: from.key, leaseId: from.leaseId, token: from.storeToken },
          storeAcquireRequest(ctx, req, leaseId),
          o,
        ),
      (late) =>
        releaseLateGrant(
          ctx,
          req.key,
          leaseId,
          late.then((r) => r.acquired),
        ),
    );
    if (!settled.ok) {
      waiter.deliver(undefined);
      if (isProgrammerError(settled.error)) throw settled.error;
      return { status: 'unavailable', cause: settled.error };
    }
    const { released, acquired } = settled.value;
    let lease: Lease | undefined;
    if (acquired.status === 'acquired') {
      try {
        lease = this.held.admit(req, leaseId, acquired.token, sentAt, waiter.startedAt);
      } catch (err) {
        waiter.deliver(undefined);
        throw err;
      }
      if (lease === undefined) releaseLateGrant(ctx, req.key, leaseId, Promise.resolve(acquired));
    }
    waiter.deliver(lease);
    return { status: released };
  }
}
