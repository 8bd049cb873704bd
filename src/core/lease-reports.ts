import { leaseIdPrefix } from './ids.js';
import type { LeaseContext } from './lease-grant.js';
import type { LossReason, ReleaseResult } from './results.js';
import type { Token } from './types.js';

/**
 * What names a lease in its events and log lines. Every log line about a lease carries the same
 * fields: `ownerId`, `key`, `lease` (the lease id's first 8 characters, never the whole id: it
 * is the lease's credential at the store) and `token` (a decimal string).
 */
export interface ReportedLease {
  readonly key: string;
  readonly leaseId: string;
  readonly ownerId: string;
  readonly token: Token;
}

type Reports = Pick<LeaseContext, 'events' | 'logger'>;

/** A renewal that was not confirmed: the lease retries until its local deadline. */
export function reportRenewFailed(ctx: Reports, lease: ReportedLease, cause: unknown): void {
  const prefix = leaseIdPrefix(lease.leaseId);
  const { key, ownerId, token } = lease;
  ctx.events.emit({ type: 'renew_failed', key, ownerId, token, leaseIdPrefix: prefix, cause });
  ctx.logger.warn(
    { ownerId, key, lease: prefix, token: token.toString(), err: String(cause) },
    'lease renewal failed; retrying until the local deadline',
  );
}

/** A confirmed renewal: `latencyMs` from send to answer, `lateMs` after it was due. */
export function reportRenewed(
  ctx: Reports,
  lease: ReportedLease,
  latencyMs: number,
  lateMs: number,
): void {
  // Checked first: a renewal is the hot path, and an event nobody listens to costs nothing.
  if (!ctx.events.active) return;
  const { key, ownerId, token } = lease;
  const prefix = leaseIdPrefix(lease.leaseId);
  ctx.events.emit({
    type: 'renewed',
    key,
    ownerId,
    token,
    leaseIdPrefix: prefix,
    latencyMs,
    lateMs,
  });
}

/** A release, with what the store (or a hand-off) answered. */
export function reportReleased(
  ctx: Reports,
  lease: ReportedLease,
  result: ReleaseResult,
  heldMs: number,
): void {
  if (!ctx.events.active) return;
  const { key, ownerId, token } = lease;
  const prefix = leaseIdPrefix(lease.leaseId);
  const status = result.status;
  ctx.events.emit({
    type: 'released',
    key,
    ownerId,
    token,
    leaseIdPrefix: prefix,
    result: status,
    heldMs,
  });
}

/** A lease that ended other than by its release. */
export function reportLost(
  ctx: Reports,
  lease: ReportedLease,
  reason: LossReason,
  heldMs: number,
): void {
  const { key, ownerId, token } = lease;
  const prefix = leaseIdPrefix(lease.leaseId);
  ctx.events.emit({ type: 'lost', key, ownerId, token, leaseIdPrefix: prefix, reason, heldMs });
  ctx.logger.warn(
    { ownerId, key, lease: prefix, token: token.toString(), reason, heldMs },
    'lease lost',
  );
}

/** A background renewal that failed unexpectedly: the lease fails closed. */
export function reportRenewCrashed(ctx: Reports, lease: ReportedLease, err: unknown): void {
  ctx.logger.error(
    {
      ownerId: lease.ownerId,
      key: lease.key,
      lease: leaseIdPrefix(lease.leaseId),
      token: lease.token.toString(),
      err: String(err),
    },
    'lease renewal failed unexpectedly; treating the lease as lost',
  );
}
