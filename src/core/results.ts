import type { HolderInfo, Token } from './types.js';
import type { Lease } from './lease.js';

/** The outcome of {@link LeaseClient.acquire}. Expected outcomes are values, not errors. */
export type AcquireResult =
  | { readonly status: 'acquired'; readonly lease: Lease; readonly waitedMs: number }
  | {
      readonly status: 'busy';
      readonly holder: HolderInfo;
      /** The holder's remaining time by the store's clock: a useful earliest retry. */
      readonly retryAfterMs: number;
      /**
       * `lock_delay` when the key has no live holder but its last one expired less than its
       * lock-delay ago (`retryAfterMs` is then the delay left); absent for a live holder.
       */
      readonly reason?: 'held' | 'lock_delay';
    }
  | { readonly status: 'unavailable'; readonly cause: unknown };

/**
 * The outcome of an acquisition that named fences to claim on (`acquire(key, { fences })`):
 * an {@link AcquireResult}, or {@link ClaimFailedResult} when a fence refused the new token or
 * could not be reached — the lease was then released, and nothing was handed to the caller.
 */
export type FencedAcquireResult = AcquireResult | ClaimFailedResult;

/**
 * An acquisition whose grant could not be installed on every fence it named: the lease was
 * released before the result was returned. `stale_fence`: a newer owner had already claimed or
 * written there — this token lost before it started, do not retry under it. `unavailable`:
 * the fence threw or did not answer within the lease's validity (its claim may or may not have
 * landed; a landed claim only raises that scope's mark to this token, which is harmless).
 */
export type ClaimFailedResult = {
  readonly status: 'claim_failed';
  /** The index in `fences` of the first entry that refused or could not be reached. */
  readonly fence: number;
  /** That entry's `name`, when it has one. */
  readonly name: string | undefined;
  /** The scope claimed on at that fence. */
  readonly scope: string;
  /** The token that was granted, then released. */
  readonly token: Token;
} & (
  | { readonly reason: 'stale_fence'; readonly highWaterMark: bigint }
  | { readonly reason: 'unavailable'; readonly cause: unknown }
);

/**
 * The outcome of a fence's `claim(scope, token)`: the generation is installed at the resource
 * with no domain write. `applied`: the scope's mark now refuses every token below this one
 * (the mark moved, or already was there), durably; the first write at this token still
 * passes under either policy. `stale_fence`: a newer token already claimed or wrote there —
 * definitive, the caller has lost before it started.
 */
export type ClaimResult =
  | { readonly status: 'applied' }
  | { readonly status: 'stale_fence'; readonly highWaterMark: bigint };

/**
 * The outcome of {@link Lease.renew}. `lost` is final: the lease never comes back.
 * `unavailable`: the renewal was not confirmed; the lease stays valid only until its
 * current deadline.
 */
export type RenewResult =
  | { readonly status: 'renewed'; readonly deadline: number }
  | { readonly status: 'lost'; readonly reason: LossReason }
  | { readonly status: 'unavailable'; readonly cause: unknown };

/** The outcome of {@link Lease.release}. */
export type ReleaseResult =
  | { readonly status: 'released' }
  /** The store no longer knew this lease (it expired and perhaps someone else holds the key). */
  | { readonly status: 'not_owner' }
  /** The store could not be reached; expiry will free the key. */
  | { readonly status: 'unavailable'; readonly cause: unknown };

/** Why a lease stopped being valid. */
export type LossReason =
  /** The store said the lease is gone (expired there, or taken over). */
  | 'lost'
  /** The local deadline passed without a confirmed renewal. */
  | 'expired'
  /** The owner released it. */
  | 'released'
  /** The injected monotonic clock misbehaved; the client fails closed. */
  | 'clock'
  /** The client was closed. */
  | 'closed'
  /**
   * The store failed over to a replica that may lack the last grants; it raised its token
   * epoch and ended every lease held across the change (decision 042).
   */
  | 'failover'
  /** The store's data came back from a copy; it raised its token epoch, as for `failover`. */
  | 'restore';

/** The outcome of a fenced mutation at the protected resource. */
export type FenceResult<T = unknown> =
  | { readonly status: 'applied'; readonly value: T }
  /** The same (token, idempotency key) was applied before; nothing was done again. */
  | { readonly status: 'duplicate' }
  /** A newer token has reached the resource: definitive, never retry under this lease. */
  | { readonly status: 'stale_fence'; readonly highWaterMark: bigint };

/** Use in the `default` branch of a `switch` over a `status` to prove it exhaustive. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
