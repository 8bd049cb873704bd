import { invalidArgument } from '../core/errors.js';

/**
 * What one retention pass did, on every store: how many key records it deleted, and the
 * floor every later first grant of a key now starts above (a grant of a deleted key, or of a
 * key never seen, gets a token greater than `floor`).
 */
export interface PruneReport {
  /** Key records deleted. */
  readonly deleted: number;
  /** Every later first grant of any key gets a token above this (0n: nothing raised yet). */
  readonly floor: bigint;
  /** Statements or scripts run, each holding its locks for one bounded batch only. */
  readonly batches: number;
}

/** Options every store's retention pass takes. */
export interface PruneOptions {
  /**
   * Delete a key only when it was released, or expired at least this long ago (ms). Released
   * keys are deleted at once on stores that do not record when a key was released. Default 0.
   */
  readonly olderThanMs?: number;
  /** Records per statement or script. Default 1,000, at most 10,000. */
  readonly batch?: number;
  /** Stop after deleting this many records (a bounded pass; run it again for more). */
  readonly maxDeleted?: number;
}

/** The defaults of {@link PruneOptions}. */
export const PRUNE_DEFAULTS = Object.freeze({ olderThanMs: 0, batch: 1000, maxBatch: 10_000 });

/** Checked options: typed errors for bad input. */
export function resolvePruneOptions(options: PruneOptions): {
  olderThanMs: number;
  batch: number;
  maxDeleted: number;
} {
  const olderThanMs = options.olderThanMs ?? PRUNE_DEFAULTS.olderThanMs;
  if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0) {
    throw invalidArgument('olderThanMs', 'must be a non-negative integer of ms', olderThanMs);
  }
  const batch = options.batch ?? PRUNE_DEFAULTS.batch;
  if (!Number.isSafeInteger(batch) || batch < 1 || batch > PRUNE_DEFAULTS.maxBatch) {
    throw invalidArgument(
      'batch',
      `must be an integer from 1 to ${PRUNE_DEFAULTS.maxBatch}`,
      batch,
    );
  }
  const maxDeleted = options.maxDeleted ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(maxDeleted) || maxDeleted < 0) {
    throw invalidArgument('maxDeleted', 'must be a non-negative integer', maxDeleted);
  }
  return { olderThanMs, batch, maxDeleted };
}
