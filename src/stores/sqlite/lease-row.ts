import { leaseIdPrefix } from '../../core/ids.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
} from '../../core/store.js';
import type { HolderInfo } from '../../core/types.js';
import { LIMITS, validateTokenBlock } from '../../core/validate.js';

/** A row of the lease table, as `SELECT_LEASE` and `LIST_LIVE` return it. */
export interface LeaseRow {
  lease_id: string | null;
  owner_id: string | null;
  token: bigint;
  /** Tokens the grant reserved, its own included (decision 007); null means 1. */
  token_block: bigint | null;
  expires_us: bigint;
  boot_id: string;
  value: string | null;
  /** The holder's lock-delay in µs (migration 0004); absent in rows `LIST_LIVE` returns. */
  lock_delay_us?: bigint;
}

/** Whether the row holds a lease of this boot that has not expired at `nowUs`. */
export function isLive(row: LeaseRow, nowUs: bigint, bootId: string): boolean {
  return row.lease_id !== null && row.boot_id === bootId && row.expires_us > nowUs;
}

/** The request's token block, checked (the contract allows 1 to LIMITS.maxTokenBlock). */
export function tokenBlockOf(request: StoreAcquireRequest): number {
  return validateTokenBlock(request.tokenBlock);
}

/** The highest token granted or reserved by the row's last grant: its block's top. */
export function topOf(row: LeaseRow): bigint {
  return row.token + (row.token_block ?? 1n) - 1n;
}

/** Whether a grant of `request`'s block after `row`'s would stay within int64. */
export function hasRoom(row: LeaseRow, request: StoreAcquireRequest): boolean {
  return topOf(row) + BigInt(tokenBlockOf(request)) <= LIMITS.maxToken;
}

/** Whole ms until the row's lease expires, rounded up; 0 once it has. */
export function remainingMs(row: LeaseRow, nowUs: bigint): number {
  const us = row.expires_us - nowUs;
  return us > 0n ? Number((us + 999n) / 1000n) : 0;
}

/** The row's holder as the contract reports it (a prefix of the lease id only). */
export function holderOf(row: LeaseRow, nowUs: bigint): HolderInfo {
  return {
    ownerId: row.owner_id ?? '',
    token: row.token,
    remainingMs: remainingMs(row, nowUs),
    leaseIdPrefix: leaseIdPrefix(row.lease_id ?? ''),
    value: row.value ?? undefined,
  };
}

/** The named parameters of the `ACQUIRE` upsert for `request` at `nowUs`. */
export function grantParams(
  request: StoreAcquireRequest,
  nowUs: bigint,
  expiresWallMs: number,
  bootId: string,
): Record<string, unknown> {
  const block = tokenBlockOf(request);
  return {
    key: request.key,
    leaseId: request.leaseId,
    ownerId: request.ownerId,
    tokenBlock: block === 1 ? null : BigInt(block),
    roomTop: LIMITS.maxToken - BigInt(block - 1),
    expiresUs: nowUs + BigInt(request.ttlMs) * 1000n,
    bootId,
    expiresWallMs,
    value: request.value ?? null,
    lockDelayUs: BigInt(request.lockDelayMs ?? 0) * 1000n,
    ignoreLockDelay: request.ignoreLockDelay === true ? 1 : 0,
    nowUs,
  };
}

/**
 * Whole ms left of the lock-delay the row's expired holder left, for `request`: 0 when the
 * holder released (no lease id), the delay has passed, the machine restarted since (its
 * monotonic clock cannot measure the delay) or the request ignores lock-delays.
 */
export function lockDelayLeftMs(
  row: LeaseRow,
  nowUs: bigint,
  bootId: string,
  request: StoreAcquireRequest,
): number {
  if (row.lease_id === null || row.boot_id !== bootId || request.ignoreLockDelay === true) return 0;
  const us = row.expires_us + (row.lock_delay_us ?? 0n) - nowUs;
  return us > 0n ? Number((us + 999n) / 1000n) : 0;
}

/** The busy answer for `row`: its live holder, or the lock-delay its expired holder left. */
export function busyAnswer(
  row: LeaseRow,
  nowUs: bigint,
  bootId: string,
  request: StoreAcquireRequest,
): Extract<StoreAcquireResult, { status: 'busy' }> {
  const holder = holderOf(row, nowUs);
  if (isLive(row, nowUs, bootId)) {
    return { status: 'busy', holder, retryAfterMs: remainingMs(row, nowUs) };
  }
  const left = lockDelayLeftMs(row, nowUs, bootId, request);
  return { status: 'busy', holder, retryAfterMs: left, reason: 'lock_delay' };
}

/**
 * A hand-off's answer from its transaction's outcome: granted, or busy with the live holder the
 * same transaction read.
 */
export function handOffResult(
  outcome: {
    readonly released: boolean;
    readonly granted: { token: bigint } | undefined;
    readonly holder: LeaseRow | undefined;
  },
  expiresWallMs: number,
  nowUs: bigint,
  bootId: string,
  request: StoreAcquireRequest,
): StoreHandOffResult {
  const released = outcome.released ? 'released' : 'not_owner';
  if (outcome.granted !== undefined)
    return {
      released,
      acquired: {
        status: 'acquired',
        token: outcome.granted.token,
        expiresAtWallMs: expiresWallMs,
      },
    };
  return { released, acquired: busyAnswer(outcome.holder!, nowUs, bootId, request) };
}
