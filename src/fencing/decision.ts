import { invalidArgument } from '../core/errors.js';
import type { FenceDecision, FenceDecisionHook } from '../core/fence-decision.js';

// The decision's types belong to core (core/fence-decision.ts), below the stores, metrics and
// telemetry that name them too. Named here only for src/fencing/http/, which still imports
// them from this module; drop once it imports core (issue 47).
export type { FenceDecision, FenceDecisionHook } from '../core/fence-decision.js';

/** Checks an `onDecision` option at construction. */
export function checkDecisionHook(value: unknown): FenceDecisionHook | undefined {
  if (value === undefined || typeof value === 'function') return value as FenceDecisionHook;
  throw invalidArgument('onDecision', 'must be a function', value);
}

/** Hands `decision` to `hook`, ignoring what it throws (see {@link FenceDecisionHook}). */
export function tellDecision(hook: FenceDecisionHook | undefined, decision: FenceDecision): void {
  if (hook === undefined) return;
  try {
    hook(decision);
  } catch {
    // A monitor's failure must not turn an applied write into an error.
  }
}

/** The decision a claim tells `onDecision`: `op: 'claim'`, with the mark when refused. */
export function claimDecision(
  scope: string,
  token: bigint,
  r: { readonly status: string; readonly highWaterMark?: bigint },
): FenceDecision {
  return r.status === 'stale_fence'
    ? { scope, token, status: 'stale_fence', op: 'claim', highWaterMark: r.highWaterMark! }
    : { scope, token, status: 'applied', op: 'claim' };
}
