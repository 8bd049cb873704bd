import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
} from '../../src/core/store.js';

/** A promise with its resolve/reject exposed: a barrier a test opens when it chooses. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

type Call<Req, Res> = (
  request: Req,
  options: StoreRequestOptions,
  forward: () => Promise<Res>,
) => Promise<Res>;

/**
 * Fault injection over a real store: each operation can be intercepted to delay, drop, fail
 * or hold the request or its reply. Without an interceptor it forwards unchanged.
 */
export class FaultyStore extends ForwardingLeaseStore {
  onAcquire: Call<StoreAcquireRequest, StoreAcquireResult> | undefined;
  onRenew: Call<StoreLeaseRef & { ttlMs: number }, StoreRenewResult> | undefined;
  onRelease: Call<StoreLeaseRef, StoreReleaseResult> | undefined;
  /** Only called when the inner store can hand off (then so can this one). */
  onHandOff:
    Call<{ release: StoreLeaseRef; acquire: StoreAcquireRequest }, StoreHandOffResult> | undefined;
  readonly calls = { acquire: 0, renew: 0, release: 0, handOff: 0 };

  constructor(inner: LeaseStore) {
    super(inner);
  }

  override tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.calls.acquire++;
    const forward = (): Promise<StoreAcquireResult> => this.inner.tryAcquire(request, options);
    return this.onAcquire ? this.onAcquire(request, options, forward) : forward();
  }
  override renew(
    lease: StoreLeaseRef & { ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.calls.renew++;
    const forward = (): Promise<StoreRenewResult> => this.inner.renew(lease, options);
    return this.onRenew ? this.onRenew(lease, options, forward) : forward();
  }
  override release(
    lease: StoreLeaseRef,
    options: StoreRequestOptions,
  ): Promise<StoreReleaseResult> {
    this.calls.release++;
    const forward = (): Promise<StoreReleaseResult> => this.inner.release(lease, options);
    return this.onRelease ? this.onRelease(lease, options, forward) : forward();
  }
  protected override handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    this.calls.handOff++;
    const forward = (): Promise<StoreHandOffResult> => super.handOff(release, acquire, options);
    return this.onHandOff ? this.onHandOff({ release, acquire }, options, forward) : forward();
  }
}
