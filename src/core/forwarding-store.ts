import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
} from './store.js';
import type { LeaseState, StoreCapabilities } from './types.js';

/**
 * A `LeaseStore` that forwards every call to another store. Extend it and override only the
 * operations you want to observe or disturb: recording histories, injecting faults, planting
 * bugs for the simulation.
 */
export class ForwardingLeaseStore implements LeaseStore {
  constructor(protected readonly inner: LeaseStore) {}

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
  watch(key: string, onChange: () => void): Promise<Unwatch> {
    return this.inner.watch(key, onChange);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
