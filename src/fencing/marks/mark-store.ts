import { invalidArgument } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';

/**
 * How a scope's mark compares an incoming token: `>=` accepts several writes per grant (the
 * same token again), `>` one write per grant.
 */
export type MarkPolicy = '>=' | '>';

/** One check-and-advance asked of a {@link MarkStore}. */
export interface MarkRequest {
  /** The fencing scope (same rules as a lease key). */
  readonly scope: string;
  /** The writer's token (already parsed: a bigint from 1 to 2^63-1). */
  readonly token: bigint;
  readonly policy: MarkPolicy;
  /**
   * Identifies one operation across retries under one token: a second check with the same
   * (scope, token, key) answers `duplicate`. The key is recorded with state `pending` in the
   * same transaction as the mark.
   */
  readonly idempotencyKey?: string;
  /**
   * The scope's version the writer expects. Accepted only when equal to the stored version,
   * which then rises by one in the same transaction as the mark.
   */
  readonly expectedVersion?: bigint;
}

/** What a {@link MarkStore} decided. */
export type MarkDecision =
  /**
   * The token passed and the mark (and version, and idempotency key) are committed durably.
   * `wrote` is false when nothing had to change (the current token under `>=`, no key, no
   * version): that check cost no write. `version` is the scope's version afterwards.
   */
  | { readonly status: 'applied'; readonly wrote: boolean; readonly version: bigint | undefined }
  /** This (scope, token, idempotency key) was checked before. Nothing changed. */
  | { readonly status: 'duplicate' }
  /** A newer token reached the scope (or, under `>`, the same one). Nothing changed. */
  | { readonly status: 'stale_fence'; readonly highWaterMark: bigint }
  /** The token passed but the expected version did not match. Nothing changed. */
  | { readonly status: 'version_mismatch'; readonly version: bigint };

/**
 * What became of the forward of an idempotent request:
 * - `pending`: recorded with the mark; the forward has not finished (or the process died).
 * - `answered`: the upstream (or the handler) answered; `status`, `headers` (the ones worth
 *   replaying, lower-case names) and `body` replay it (`body` undefined when it was too large
 *   to keep).
 * - `not_sent`: the upstream was never reached (connection refused): a retry may forward.
 * - `unknown`: the upstream may have received it but did not answer (timeout, reset).
 */
export type AnswerRecord =
  | { readonly state: 'pending' | 'not_sent' | 'unknown' }
  | {
      readonly state: 'answered';
      readonly status: number;
      readonly headers: Readonly<Record<string, string>>;
      readonly body: Buffer | undefined;
    };

/** A scope held by this process for the length of one forward (see {@link MarkStore.holdScope}). */
export interface ScopeHold {
  /** Fires when the hold was lost (its database session died) before `release()`. */
  readonly lost: AbortSignal;
  /** Gives the scope back. Never throws. */
  release(): Promise<void>;
}

/**
 * The durable high-water marks of the HTTP fencing gateway and middleware: a check-and-advance
 * of (scope, token, policy, optional idempotency key, optional expected version) committed
 * before the caller forwards anything, built on the SQLite, PostgreSQL or Redis fence.
 *
 * Guarantees: `applied` means the mark is at least the token, durably (as durable as the
 * backend: fsync'd SQLite, committed PostgreSQL, Redis per its persistence settings); a
 * `stale_fence` or `version_mismatch` left everything unchanged. A backend failure throws a
 * `LeaseholdError` (`ERR_UNAVAILABLE`), never a guessed decision.
 */
export interface MarkStore {
  readonly kind: 'sqlite' | 'postgres' | 'redis';
  /** Check and advance; see {@link MarkDecision}. */
  check(request: MarkRequest): Promise<MarkDecision>;
  /**
   * Claim before start (DESIGN §4): raises the scope's mark to `token` with no write, on the
   * backend fence's claim (same decision and durability as {@link check}): `applied` exactly
   * when a write at `token` would pass under `policy` now, after which every lower token is
   * refused and — under `>` — `token`'s one write still passes; else `stale_fence`, nothing
   * changed. Under `>=` a claim at the mark is applied without a write. Throws
   * `ERR_UNAVAILABLE` when the backend fails.
   */
  claim(scope: string, token: bigint, policy: MarkPolicy): Promise<ClaimResult>;
  /** The scope's mark (0n when none) and version (0n when none). */
  read(scope: string): Promise<{ highWaterMark: bigint; version: bigint }>;
  /** The record of an idempotency key (undefined when unknown or expired). */
  answer(scope: string, token: bigint, key: string): Promise<AnswerRecord | undefined>;
  /** Records what became of an idempotent request's forward. */
  saveAnswer(scope: string, token: bigint, key: string, record: AnswerRecord): Promise<void>;
  /**
   * Holds `scope` across processes until `release()` (PostgreSQL only: a session advisory
   * lock). Absent when the backend cannot.
   */
  holdScope?(scope: string): Promise<ScopeHold>;
  close(): Promise<void>;
}

/** Largest response body kept to replay an idempotent request's answer. */
export const MAX_STORED_ANSWER_BYTES = 64 * 1024;

/**
 * The stored form of an answer's headers: JSON, next to a `content_type` column that answers
 * recorded before headers were kept have alone.
 */
export function encodeAnswerHeaders(headers: Readonly<Record<string, string>>): string {
  return JSON.stringify(headers);
}

/** Reads {@link encodeAnswerHeaders}'s form back (or an older record's content type alone). */
export function decodeAnswerHeaders(
  json: string | null | undefined,
  contentType: string | null | undefined,
): Record<string, string> {
  if (typeof json === 'string') {
    try {
      const parsed = JSON.parse(json) as unknown;
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
        const out: Record<string, string> = {};
        for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') out[k] = v;
        return out;
      }
    } catch {
      // A damaged record replays without headers rather than failing the retry.
    }
  }
  return typeof contentType === 'string' ? { 'content-type': contentType } : {};
}

/** Thrown inside a fence's transaction to roll it back on a version mismatch. */
export class VersionMismatch extends Error {
  constructor(readonly version: bigint) {
    super(`version is ${version}`);
  }
}

/** Checks a policy option. */
export function checkPolicy(value: unknown, field = 'policy'): MarkPolicy {
  if (value !== '>=' && value !== '>') throw invalidArgument(field, "must be '>=' or '>'", value);
  return value;
}

/**
 * The decision a read of the current mark already settles, so that the common case (the
 * current token again, or a stale one) costs no write. Undefined: the store must decide.
 * Under `>` the current token again is the store's to decide: a claim may have installed the
 * mark, and then that token's one write still passes.
 */
export function decideFromMark(
  request: MarkRequest,
  mark: bigint,
  version: bigint | undefined,
): MarkDecision | undefined {
  if (request.idempotencyKey !== undefined || request.expectedVersion !== undefined) {
    return undefined;
  }
  if (request.token < mark) return { status: 'stale_fence', highWaterMark: mark };
  if (request.token === mark && request.policy === '>=')
    return { status: 'applied', wrote: false, version };
  return undefined;
}
