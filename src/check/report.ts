import type { HistoryEvent } from '../history/events.js';
import type { LinearizabilityOptions } from './linearizability.js';

/** The invariants the checker knows (VERIFICATION.md); the full I8 is not checked here. */
export type InvariantId =
  'I1' | 'I2' | 'I3' | 'I4' | 'I5' | 'I6' | 'I7' | 'I8' | 'I9' | 'I10' | 'I11' | 'I12';

/**
 * `ok`: checked, no violation. `violated`: a safety failure. `expected`: violations under a
 * fault that makes them expected (I3/I4/I5 only) — reported, not a failure. `not_checked`: the
 * history lacks the data (store-side times, a final read, store operations …). `unknown`: the
 * check ran out of its budget (I5) — neither a pass nor a failure.
 */
export type InvariantStatus = 'ok' | 'violated' | 'expected' | 'not_checked' | 'unknown';

/** One counterexample: which invariant, a sentence, and the events that show it. */
export interface Violation {
  readonly invariant: InvariantId;
  readonly message: string;
  readonly events: readonly HistoryEvent[];
}

/** The outcome for one invariant. */
export interface InvariantReport {
  readonly status: InvariantStatus;
  readonly violations: readonly Violation[];
  readonly note?: string;
}

/** Counts a run reports so they can be quoted (VERIFICATION.md "Test goals with figures"). */
export interface HistoryFigures {
  readonly grants: number;
  /** Grants made by a hand-off (`releaseAndAcquire`), a subset of `grants`. */
  readonly handOffs: number;
  /**
   * Acquisitions a client answered with a token of its store lease's block, without a store
   * grant of their own (local succession, decision 007). 0 when the history has no store events.
   */
  readonly localSuccessions: number;
  readonly fencedWritesAttempted: number;
  readonly unfencedWritesAttempted: number;
  readonly staleWritesRejected: number;
  readonly staleWritesAccepted: number;
  /**
   * Writes a resource applied with a token below that of a newer owner who had already
   * started (its acquisition answered, or — when it claimed there — its claim applied), and
   * that no applied write had yet shown the resource: the stale write that lands before the
   * new owner's first write. Not counted in `staleWritesAccepted` (I1 cannot see it); a
   * violation only when the newer owner had claimed (I9).
   */
  readonly staleFirstWritesAccepted: number;
  /** Claims the resources applied (`claim` events). */
  readonly claimsApplied: number;
  readonly i3Overlaps: number;
  readonly lostAcknowledgedWrites: number;
  /** Store-time gaps from a holder's last grant/renew to the next grant, for leases that expired. */
  readonly takeoverMs: readonly number[];
  /** Smallest `store expiry − client deadline` seen (I4 slack); undefined when not measurable. */
  readonly minSlackMs: number | undefined;
}

/** The checker's verdict on one history. */
export interface CheckReport {
  /** True when no safety invariant is violated (expected I3/I4 failures do not count). */
  readonly valid: boolean;
  readonly invariants: Readonly<Record<InvariantId, InvariantReport>>;
  readonly figures: HistoryFigures;
  readonly events: number;
}

/** Options for {@link checkHistory}. */
export interface CheckOptions {
  /** Overrides the history's `meta.livenessBoundMs`. */
  readonly livenessBoundMs?: number;
  /**
   * How far store-side times in the history may be off (ms): an overlap (I3) or a negative
   * slack (I4) within it is not reported. Overrides `meta.timeToleranceMs`. Defaults to 0.
   */
  readonly timeToleranceMs?: number;
  /** Counterexamples kept per invariant. Defaults to 5. */
  readonly maxExamples?: number;
  /**
   * The I5 search: step budget per key, the key's state before the history, store time from
   * `t`. `timeToleranceMs` above also widens I5's store-time windows.
   */
  readonly linearizability?: Omit<LinearizabilityOptions, 'timeToleranceMs'>;
}

export function violation(
  invariant: InvariantId,
  message: string,
  ...events: HistoryEvent[]
): Violation {
  return { invariant, message, events };
}

export function status(violations: Violation[], expected = false): InvariantStatus {
  if (violations.length === 0) return 'ok';
  return expected ? 'expected' : 'violated';
}
