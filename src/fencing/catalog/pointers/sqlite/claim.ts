import type Database from 'better-sqlite3';
import type { ClaimResult } from '../../../../core/results.js';
import type { PointerRow } from './rows.js';

/** The statements a claim uses, prepared by the pointer store. */
type ClaimStatements = Record<
  'SELECT_POINTER' | 'SELECT_FENCE_MARK' | 'SELECT_CLAIM_MARK' | 'CLAIM_POINTER' | 'CLAIM_FIRST',
  Database.Statement
>;

const APPLIED: ClaimResult = Object.freeze({ status: 'applied' });

/**
 * A claim of the SQLite pointer store, in one immediate transaction: raises the name's stored
 * mark to `mark` — in its pointer row, or in its claim row while the name has no pointer
 * (a first publish reads it, see {@link firstPublishMark}) — when it is at most `mark`; else `stale_fence` with the
 * stored mark, and nothing changes. `mark` is what the policy needs installed (the token
 * under `'>='`, the token − 1 under `'>'`).
 */
export function claimName(
  db: Database.Database,
  s: ClaimStatements,
  name: string,
  mark: bigint,
): ClaimResult {
  return db
    .transaction((): ClaimResult => {
      const cur = s.SELECT_POINTER.get({ name }) as PointerRow | undefined;
      const stored = cur !== undefined ? cur.high_water : firstPublishMark(s, name);
      if (stored > mark) return { status: 'stale_fence', highWaterMark: stored };
      // Token 1 under '>' installs mark 0: nothing to raise, and nothing was published.
      if (mark === 0n) return APPLIED;
      if (cur !== undefined) s.CLAIM_POINTER.run({ name, mark });
      else s.CLAIM_FIRST.run({ name, mark });
      return APPLIED;
    })
    .immediate();
}

/**
 * The mark a name without a pointer row has: the fence table's (names fenced before version
 * 2) or a claim's, the higher. A catalog opened without migrating may predate claims (no
 * claim table): then no claim was made through it.
 */
export function firstPublishMark(
  s: Pick<ClaimStatements, 'SELECT_FENCE_MARK' | 'SELECT_CLAIM_MARK'>,
  name: string,
): bigint {
  const fence = (s.SELECT_FENCE_MARK.get({ name }) as { hwm: bigint } | undefined)?.hwm ?? 0n;
  let claim = 0n;
  try {
    claim =
      (s.SELECT_CLAIM_MARK.get({ name }) as { high_water: bigint } | undefined)?.high_water ?? 0n;
  } catch (err) {
    if (!/no such table/.test(String(err))) throw err;
  }
  return fence > claim ? fence : claim;
}
