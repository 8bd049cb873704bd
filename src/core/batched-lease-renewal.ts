import type { LeaseRenewal, RenewalTiming, RenewingLease } from './lease-renewal.js';
import { BatchedRenewal, type RenewalBatcher, type RenewalOwner } from './renewal-batch.js';
import type { Settled } from './runtime/request.js';
import type { RenewResult } from './results.js';
import type { StoreRenewResult } from './store.js';

/**
 * A lease's renewals in the client's batches (renewal-batch.ts). A renewal in flight has no
 * promise of its own unless someone waits for it (a renew by hand, a release): a background
 * renewal costs no promise, and its `renewed` answer is made only for whoever waits (one
 * object per renewal was the client's largest allocation with 10,000 leases held; see
 * docs/decisions/ for the figures).
 */
export class BatchedLeaseRenewal implements LeaseRenewal, RenewalOwner, RenewalTiming {
  sentAt = 0;
  scheduledFor = 0;
  timeoutMs = 1;
  /** The lease's entry in the batches, used again for each of its renewals. */
  private readonly entry: BatchedRenewal;
  private pending = false;
  private promise: Promise<RenewResult> | undefined;
  private settle: { resolve: (r: RenewResult) => void; reject: (e: unknown) => void } | undefined;
  /** The background timer is waiting for the renewal: an unexpected error ends the lease. */
  private background = false;

  constructor(
    private readonly lease: RenewingLease,
    private readonly batcher: RenewalBatcher,
  ) {
    this.entry = new BatchedRenewal(lease.renewRequest(), this);
  }

  renew(): Promise<RenewResult> {
    if (!this.pending) {
      const immediate = this.start(undefined);
      if (immediate !== undefined) return Promise.resolve(immediate);
    }
    return this.result();
  }

  renewInBackground(now: number): void {
    if (!this.pending && this.start(now) !== undefined) return;
    this.background = true;
  }

  inFlight(): Promise<RenewResult> | undefined {
    return this.pending ? this.result() : undefined;
  }

  /**
   * Hands a renewal to the batcher, or answers at once (undefined when handed). `now`, when
   * given, is the background timer's reading of the clock: the renewal counts as sent then, a
   * few microseconds early, which only makes its deadline earlier.
   */
  private start(now: number | undefined): RenewResult | undefined {
    const ended = this.lease.prepareRenewal(now, this);
    if (ended !== undefined) return ended;
    this.entry.begin(this.timeoutMs, this.sentAt, this.scheduledFor);
    this.pending = true;
    this.batcher.submit(this.entry);
    return undefined;
  }

  /** A promise for the renewal in flight, made for whoever waits for it. */
  private result(): Promise<RenewResult> {
    this.promise ??= new Promise<RenewResult>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    return this.promise;
  }

  /** @internal The batch's answer, failure or timeout for the renewal in flight. */
  renewalSettled(renewal: BatchedRenewal, settled: Settled<StoreRenewResult>): void {
    if (!this.pending || renewal !== this.entry) return;
    let result: RenewResult | undefined;
    let error: unknown;
    let threw = false;
    try {
      result = this.lease.applyRenewal(renewal.sentAt, renewal.scheduledFor, settled);
    } catch (err) {
      threw = true;
      error = err;
    }
    // Cleared after the outcome is applied, as the direct path's `finally` does: whoever
    // asks for the renewal while it is being applied gets this one's answer.
    this.pending = false;
    const settle = this.settle;
    const background = this.background;
    this.settle = undefined;
    this.promise = undefined;
    this.background = false;
    if (!threw) {
      // Includes a `renewed` listener that called renew() while the outcome was applied.
      settle?.resolve(result ?? this.lease.renewed());
      return;
    }
    settle?.reject(error);
    if (background) this.lease.failClosed(error);
  }
}
