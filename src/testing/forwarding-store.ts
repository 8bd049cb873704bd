import {
  canHandOff,
  type HandOffLeaseStore,
  type LeaseStore,
  type StoreAcquireRequest,
  type StoreAcquireResult,
  type StoreHandOffResult,
  type StoreLeaseRef,
  type StoreReleaseResult,
  type StoreRenewResult,
  type StoreRequestOptions,
  type Unwatch,
  type WatchChange,
  type WatchOptions,
} from '../core/store.js';
import type { LeaseState, StoreCapabilities } from '../core/types.js';

/**
 * A `LeaseStore` that forwards every call to another store. Extend it and override only the
 * operations you want to observe or disturb: recording histories, injecting faults, planting
 * bugs for the simulation.
 *
 * It has {@link HandOffLeaseStore.releaseAndAcquire} exactly when the inner store has it, so
 * `canHandOff(wrapper) === canHandOff(inner)`: a wrapper must not switch the client's
 * hand-off path on or off behind the test's back. Subclasses observe or disturb a hand-off by
 * overriding {@link handOff}, which is only ever called when the inner store can hand off.
 *
 * {@link QueueingLeaseStore.acquireQueued} is not forwarded: wrapping a queueing store (etcd)
 * in a plain forwarder is how a benchmark or test runs the client's own waiting loop on it.
 * Nor is `BatchRenewingLeaseStore.renewMany`: through a forwarder every renewal is its own
 * `renew` call, which recording and fault-injecting wrappers observe one by one.
 */
export class ForwardingLeaseStore implements LeaseStore {
  /** Present only when the inner store can hand off (see the class comment). */
  declare readonly releaseAndAcquire?: HandOffLeaseStore['releaseAndAcquire'];

  constructor(protected readonly inner: LeaseStore) {
    if (canHandOff(inner)) {
      // An own property, not a prototype method: its presence is the capability.
      const handOff: HandOffLeaseStore['releaseAndAcquire'] = (release, acquire, options) =>
        this.handOff(release, acquire, options);
      Object.defineProperty(this, 'releaseAndAcquire', { value: handOff, enumerable: false });
    }
  }

  get kind(): string {
    return this.inner.kind;
  }
  get capabilities(): StoreCapabilities {
    return this.inner.capabilities;
  }
  tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    return this.inner.tryAcquire(request, options);
  }
  renew(
    lease: StoreLeaseRef & { ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    return this.inner.renew(lease, options);
  }
  release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    return this.inner.release(lease, options);
  }
  inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    return this.inner.inspect(key, options);
  }
  list(prefix: string, limit: number, options: StoreRequestOptions): Promise<LeaseState[]> {
    return this.inner.list(prefix, limit, options);
  }
  watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch> {
    return this.inner.watch(key, onChange, options);
  }
  close(): Promise<void> {
    return this.inner.close();
  }

  /**
   * The hand-off behind `releaseAndAcquire`, forwarded to the inner store. Called only when
   * the inner store can hand off; override it to record or disturb hand-offs.
   */
  protected handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    return (this.inner as HandOffLeaseStore).releaseAndAcquire(release, acquire, options);
  }
}
