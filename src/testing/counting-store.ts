import {
  isBatchRenewingLeaseStore,
  type BatchRenewingLeaseStore,
  type LeaseStore,
  type StoreRenewRequest,
  type StoreRenewManyResult,
  type StoreRenewResult,
  type StoreRequestOptions,
} from '../core/store.js';
import { ForwardingLeaseStore } from './forwarding-store.js';

/** What {@link CountingLeaseStore} counted so far. */
export interface RenewalCounts {
  /** Store calls made for renewals: each `renew` and each `renewMany` is one. */
  calls: number;
  /** Leases those calls renewed or tried to (a `renewMany` of n counts n). */
  leases: number;
}

/**
 * Any store behind a forwarder that counts the renewal calls the client makes on it: one per
 * `renew`, one per `renewMany`, whatever the store does inside (SQLite's `renew` is a
 * `renewMany` of one: still one call). For benchmarks and tests of how many store round trips
 * a client's renewals take; it works the same on every store, so no store needs a counting
 * subclass of its own.
 *
 * With `batch: true` (the default) it has `renewMany` exactly when the inner store has it, so
 * the client renews in batches as it would on the store itself; with `batch: false` it hides
 * `renewMany`, and the client renews each lease with its own call.
 */
export class CountingLeaseStore extends ForwardingLeaseStore {
  readonly counts: RenewalCounts = { calls: 0, leases: 0 };
  declare readonly renewMany?: BatchRenewingLeaseStore['renewMany'];

  constructor(inner: LeaseStore, options: { readonly batch?: boolean } = {}) {
    super(inner);
    if (options.batch !== false && isBatchRenewingLeaseStore(inner)) {
      // An own property, as the forwarder's hand-off: its presence is the capability.
      const renewMany = (
        leases: readonly StoreRenewRequest[],
        o: StoreRequestOptions,
      ): Promise<readonly StoreRenewManyResult[]> => {
        this.counts.calls++;
        this.counts.leases += leases.length;
        return inner.renewMany(leases, o);
      };
      Object.defineProperty(this, 'renewMany', { value: renewMany, enumerable: false });
    }
  }

  override renew(
    lease: StoreRenewRequest,
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.counts.calls++;
    this.counts.leases++;
    return super.renew(lease, options);
  }

  /** Starts counting again from zero. */
  reset(): void {
    this.counts.calls = 0;
    this.counts.leases = 0;
  }
}
