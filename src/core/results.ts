import type { HolderInfo } from './types.js';
import type { Lease } from './lease.js';

/** The outcome of {@link LeaseClient.acquire}. Expected outcomes are values, not errors. */
export type AcquireResult =
  | { readonly status: 'acquired'; readonly lease: Lease; readonly waitedMs: number }
  | {
      readonly status: 'busy';
      readonly holder: HolderInfo;
      /** The holder's remaining time by the store's clock: a useful earliest retry. */
      readonly retryAfterMs: number;
    }
  | { readonly status: 'unavailable'; readonly cause: unknown };

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
  | 'closed';

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
