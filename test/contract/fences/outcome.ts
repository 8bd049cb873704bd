import type { FenceResult } from '../../../src/core/results.js';
import type { FenceWriteOutcome } from '../../../src/testing/fence-contract/index.js';

/** A library fence's answer as the fence contract reads it. */
export function outcomeOf(r: FenceResult): FenceWriteOutcome {
  return r.status === 'stale_fence'
    ? { status: 'stale_fence', highWaterMark: r.highWaterMark }
    : { status: r.status };
}
