/**
 * What a fence decided about one write or claim, as handed to a fence's `onDecision` hook: for
 * monitoring (for example the lease server's event stream and metrics, through
 * `createFenceReporter` in `leasehold/http`). Tokens are bigints, as everywhere.
 */
export interface FenceDecision {
  /** The fencing scope the write was for (what the high-water mark protects). */
  readonly scope: string;
  /** The token the writer presented. */
  readonly token: bigint;
  /** The fence's answer, the same string as the write's `FenceResult.status`. */
  readonly status: 'applied' | 'duplicate' | 'stale_fence';
  /** With `stale_fence`: the high-water mark that refused the token. */
  readonly highWaterMark?: bigint;
  /**
   * `claim` for a claim before start (no data written; `applied` or `stale_fence`), absent
   * for a write. A hook that counts writes skips claims.
   */
  readonly op?: 'claim';
}

/**
 * Called once per finished fence decision, after the outcome is final (committed or rolled
 * back) and before the write's promise or return value reaches the caller. Keep it cheap and
 * non-blocking; its exceptions are ignored, so a failing monitor never changes a fence outcome.
 */
export type FenceDecisionHook = (decision: FenceDecision) => void;
