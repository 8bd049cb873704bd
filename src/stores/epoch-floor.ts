import { invalidArgument } from '../core/errors.js';
import { LIMITS } from '../core/validate.js';

/**
 * Tokens per millisecond of wall-clock time that an epoch floor reserves (the same rate as the
 * PostgreSQL epoch and the Redis time floor). A floor set at time T is at least `T_ms × 1024`,
 * and a floor carried from an earlier epoch grows by 1024 per ms since it was set.
 */
export const EPOCH_TOKENS_PER_MS = 1024n;

/** What the store knows when an epoch is raised. */
export interface EpochFloorInputs {
  /** The clock the floor is read from, in ms (the store's, where it has one). */
  readonly nowMs: bigint;
  /** The highest token (or revision-derived token) still recorded by the restored store. */
  readonly highest: bigint;
  /** The previous epoch's floor and when it was set, as far as the store remembers it. */
  readonly previous: readonly { readonly floor: bigint; readonly atMs: bigint }[];
  /** A floor given by the operator (`--at-least`), e.g. a fenced resource's high-water mark. */
  readonly atLeast: bigint;
}

/**
 * The floor of a new epoch: greater than every token issued before the restore, under the
 * assumption every store documents — fewer than 1024 tokens per millisecond on average since
 * the previous epoch (or since 1970), and a clock that does not run behind the previous
 * epoch's. Why each term:
 * - `now × 1024`: tokens issued without any epoch never outgrow it;
 * - `previous.floor + 1024 × (now − previous.atMs)`: tokens of an epoch whose floor was set
 *   above the clock (by `--at-least`) kept growing from that floor at most that fast — even
 *   the tokens the restored copy never saw;
 * - `highest + 1`: tokens the restored copy did see;
 * - `atLeast`: what only the operator knows.
 * Throws `ERR_INVALID_ARGUMENT` when the floor leaves no room below 2^63 for a grant's block.
 */
export function epochFloor(inputs: EpochFloorInputs): bigint {
  let floor = inputs.nowMs * EPOCH_TOKENS_PER_MS;
  const raise = (candidate: bigint): void => {
    if (candidate > floor) floor = candidate;
  };
  raise(inputs.highest + 1n);
  raise(inputs.atLeast);
  for (const p of inputs.previous) {
    if (p.floor <= 0n) continue;
    const elapsed = inputs.nowMs > p.atMs ? inputs.nowMs - p.atMs : 0n;
    raise(p.floor + 1n + elapsed * EPOCH_TOKENS_PER_MS);
  }
  if (floor > LIMITS.maxToken - BigInt(LIMITS.maxTokenBlock)) {
    throw invalidArgument('atLeast', 'leaves no room for later tokens below 2^63', floor);
  }
  return floor;
}
