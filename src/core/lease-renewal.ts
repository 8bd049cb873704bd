import type { Settled } from './runtime/request.js';
import type { RenewResult } from './results.js';
import type { StoreRenewRequest, StoreRenewResult } from './store.js';

/**
 * How one lease's renewals reach the store, and what is in flight: one at a time, straight to
 * the store ({@link DirectRenewal}, direct-renewal.ts), or in the client's batches
 * ({@link BatchedLeaseRenewal}, batched-lease-renewal.ts). The lease decides when to renew and
 * what an answer means; the strategy owns the request in flight and who waits for it.
 */
export interface LeaseRenewal {
  /** Renews now, or answers with the renewal already in flight. */
  renew(): Promise<RenewResult>;
  /**
   * The background timer's renewal: never rejects (an unexpected error ends the lease
   * through {@link RenewingLease.failClosed}). `now` is the timer's reading of the clock.
   */
  renewInBackground(now: number): void;
  /** The renewal in flight, for a release to wait for; undefined when there is none. */
  inFlight(): Promise<RenewResult> | undefined;
}

/** When a renewal was sent, when it was due, and how long it may take. */
export interface RenewalTiming {
  sentAt: number;
  scheduledFor: number;
  timeoutMs: number;
}

/** What a renewal strategy asks of its lease (the lease implements it). */
export interface RenewingLease {
  /** What every renewal of the lease sends; a strategy asks once and keeps it. */
  renewRequest(): StoreRenewRequest;
  /**
   * Checks before a renewal is sent: answers the outcome when the lease ends instead (its
   * clock failed or its deadline passed), or undefined after writing the renewal's timing
   * into `timing`. `now`, when given, is a reading of the clock just taken.
   */
  prepareRenewal(now: number | undefined, timing: RenewalTiming): RenewResult | undefined;
  /**
   * Applies a renewal's outcome: undefined when it moved the deadline ({@link renewed} then
   * makes the answer for whoever waits), any other outcome itself. Throws only a programmer
   * error.
   */
  applyRenewal(
    sentAt: number,
    scheduledFor: number,
    settled: Settled<StoreRenewResult>,
  ): RenewResult | undefined;
  /** The answer to a renewal that moved the deadline. */
  renewed(): RenewResult;
  /** Ends the lease after an unexpected error of a background renewal, and logs it. */
  failClosed(err: unknown): void;
}
