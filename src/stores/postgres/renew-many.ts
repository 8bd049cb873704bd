import { LeaseholdError } from '../../core/errors.js';
import type { StoreRenewRequest, StoreRenewResult } from '../../core/store.js';
import type { PgResult } from '../../drivers/postgres/client.js';
import { sortByKeyBytes } from './batches.js';
import { isLeaseId } from './answers.js';

const LOST: StoreRenewResult = Object.freeze({ status: 'lost' });

/** The leases one RENEW_MANY statement sends, and its four array parameters. */
export interface RenewManyAsk {
  /** The positions in the call's leases of the ones sent, in the order sent. */
  readonly sent: readonly number[];
  readonly params: readonly [string[], string[], string[], string[]];
}

/**
 * The RENEW_MANY parameters for `leases`, or undefined when none is sent. A lease id that is
 * not a UUID was never granted here (renew answers lost too). Keys go in the byte order the
 * coalesced grants and releases lock rows in (decision 017).
 */
export function renewManyAsk(leases: readonly StoreRenewRequest[]): RenewManyAsk | undefined {
  const sent: number[] = [];
  for (let i = 0; i < leases.length; i++) if (isLeaseId(leases[i]!.leaseId)) sent.push(i);
  if (sent.length === 0) return undefined;
  sortByKeyBytes(sent, (i) => leases[i]!.key);
  const keys = new Array<string>(sent.length);
  const ids = new Array<string>(sent.length);
  const tokens = new Array<string>(sent.length);
  const ttls = new Array<string>(sent.length);
  for (let k = 0; k < sent.length; k++) {
    const lease = leases[sent[k]!]!;
    keys[k] = lease.key;
    ids[k] = lease.leaseId;
    tokens[k] = lease.token.toString();
    ttls[k] = String(lease.ttlMs);
  }
  return { sent, params: [keys, ids, tokens, ttls] };
}

/**
 * Each lease's answer from RENEW_MANY's rows (`updated`: the 1-based positions renewed;
 * `clock`: the database's time). A lease not sent or not renewed is lost.
 */
export function renewManyAnswers(
  leases: readonly StoreRenewRequest[],
  ask: RenewManyAsk | undefined,
  updated: PgResult | undefined,
  clock: PgResult | undefined,
): StoreRenewResult[] {
  const results = new Array<StoreRenewResult>(leases.length).fill(LOST);
  if (ask === undefined) return results;
  const atMs = Number(clock?.rows[0]?.['at_ms']);
  for (const row of updated?.rows ?? []) {
    const at = ask.sent[Number(row['i']) - 1];
    if (at === undefined)
      throw new LeaseholdError('ERR_PROTOCOL', 'PostgreSQL renewed a lease it was not asked to');
    const expiresAtWallMs = atMs + leases[at]!.ttlMs;
    results[at] = Number.isFinite(expiresAtWallMs)
      ? { status: 'renewed', expiresAtWallMs }
      : { status: 'renewed' };
  }
  return results;
}
