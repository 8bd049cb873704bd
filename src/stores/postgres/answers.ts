import { LeaseholdError } from '../../core/errors.js';
import { leaseIdPrefix } from '../../core/ids.js';
import { validateTokenBlock } from '../../core/validate.js';
import type { StoreAcquireRequest, StoreAcquireResult } from '../../core/store.js';
import type { HolderInfo } from '../../core/types.js';
import { parseBigint, type SqlParam } from '../../drivers/postgres/client.js';

/** How the store's requests become statement parameters and its rows become answers. */

export function acquireParams(request: StoreAcquireRequest): SqlParam[] {
  const block = validateTokenBlock(request.tokenBlock);
  return [
    request.key,
    request.leaseId,
    request.ttlMs,
    request.ownerId,
    request.value ?? null,
    block,
  ];
}

/** The grant function's row as an answer; undefined when it lost its races (no row). */
export function acquireAnswer(
  row: Record<string, unknown> | undefined,
): StoreAcquireResult | undefined {
  if (row === undefined) return undefined;
  const status = row['status'];
  const token = parseBigint(row['token']);
  if (status === 'acquired' || status === 'held') {
    const expiresAtWallMs = Number(row['expires_ms']);
    return Number.isFinite(expiresAtWallMs)
      ? { status: 'acquired', token, expiresAtWallMs }
      : { status: 'acquired', token };
  }
  const holder = holderOf(row, token);
  return { status: 'busy', holder, retryAfterMs: holder.remainingMs };
}

export function holderOf(row: Record<string, unknown>, token: bigint): HolderInfo {
  const detailsOk = row['details_ok'] === true;
  const ownerId = row['owner_id'];
  const value = row['value'];
  return {
    // A holder that came in through the seed's own statements has no leasehold details.
    ownerId: detailsOk && typeof row['owner_name'] === 'string' ? row['owner_name'] : '',
    token,
    remainingMs: Number(row['remaining_ms'] ?? 0),
    leaseIdPrefix: leaseIdPrefix(typeof ownerId === 'string' ? ownerId : ''),
    value: detailsOk && typeof value === 'string' ? value : undefined,
  };
}

/**
 * GRANT's packed row (migration 0005) as the row ACQUIRE returns, for {@link acquireAnswer}:
 * `answer` holds status, token, expires_ms, remaining_ms, owner_id and details_ok separated
 * by single spaces (none of them contains one), an absent value empty.
 */
export function unpackGrant(row: Record<string, unknown>): Record<string, unknown> {
  const packed = row['answer'];
  const f = typeof packed === 'string' ? packed.split(' ') : [];
  if (f.length !== 6) {
    throw new LeaseholdError('ERR_PROTOCOL', 'PostgreSQL returned a malformed grant answer');
  }
  return {
    status: f[0],
    token: f[1],
    // Absent stays undefined: Number(undefined) is NaN, so no expiry is reported from it.
    expires_ms: f[2] === '' ? undefined : f[2],
    remaining_ms: f[3] === '' ? null : f[3],
    owner_id: f[4] === '' ? null : f[4],
    owner_name: row['holder_name'],
    value: row['holder_value'],
    details_ok: f[5] === 't',
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `leaseId` can be one this store granted (its lease ids are UUIDs). */
export function isLeaseId(leaseId: string): boolean {
  return UUID.test(leaseId);
}
