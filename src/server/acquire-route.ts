import { invalidArgument, isLeaseholdError } from '../core/errors.js';
import { parseDuration } from '../core/duration.js';
import { leaseIdPrefix, newLeaseId } from '../core/ids.js';
import { linkSignals } from '../core/runtime/signals.js';
import type { StoreAcquireRequest, StoreAcquireResult } from '../core/store.js';
import {
  LIMITS,
  validateOwnerId,
  validateTtl,
  validateValue,
  validateWait,
} from '../core/validate.js';
import { acquireWaiting } from './acquire-wait.js';
import type { AcquireBody } from './api.js';
import { authorizeKey, type Principal } from '../http-service/auth.js';
import type { ClientWatch } from './client-watch.js';
import type { ServerContext } from './context.js';
import { ApiError } from './http-errors.js';
import { holderJson, wholeMs } from './json.js';
import type { ServerMetrics } from './metrics.js';

/**
 * The acquire operation shared by `POST /v1/acquire` and `POST /v1/elections/{name}/campaign`:
 * authorise `acquire` on `key`, grant (waiting up to `wait`), publish the grant on the event
 * stream. Answers the JSON of an `acquired` result, or throws an ApiError (busy, unavailable).
 */
export async function acquireRoute(
  ctx: ServerContext,
  principal: Principal,
  client: ClientWatch,
  key: string,
  b: Omit<AcquireBody, 'key'>,
): Promise<AcquiredJson> {
  const { metrics, hub, tracker, logger } = ctx;
  authorizeKey(principal, 'acquire', key);
  const ttlMs = validateTtl(b.ttl, ctx.store.capabilities.minTtlMs, 'ttl');
  const waitMs = validateWait(b.wait, 'wait');
  if (waitMs > ctx.maxWaitMs) {
    throw invalidArgument('wait', `must be at most ${ctx.maxWaitMs}ms on this server`, b.wait);
  }
  const value = validateValue(b.value, 'value');
  const ownerId = validateOwnerId(b.ownerId ?? principal.name, 'ownerId');
  const tokenBlock = validateTokenBlock(ctx, b.tokenBlock);
  const leaseId = b.leaseId?.toLowerCase() ?? newLeaseId();
  const started = performance.now();
  const lockDelayMs = validateLockDelay(ctx, b.lockDelay);
  const request: StoreAcquireRequest = {
    key,
    leaseId,
    ownerId,
    ttlMs,
    value,
    ...(tokenBlock > 1 ? { tokenBlock } : {}),
    ...(lockDelayMs > 0 ? { lockDelayMs } : {}),
    ...(b.ignoreLockDelay === true ? { ignoreLockDelay: true } : {}),
  };
  let answer: StoreAcquireResult;
  /** When the store request that granted a waiting acquire was sent. */
  let grantSentAt: number | undefined;
  try {
    if (waitMs === 0) {
      // One attempt, bounded by the store request timeout: no wait to cancel.
      try {
        answer = await ctx.store.tryAcquire(request, ctx.storeOptions);
      } catch (err) {
        metrics.storeRequestDone('acquire', false, started);
        throw err;
      }
      metrics.storeRequestDone('acquire', true, started);
    } else {
      const link = linkSignals([client.signal(), ctx.shutdown]);
      try {
        const waited = await acquireWaiting(ctx.store, ctx.waiting, request, {
          waitMs,
          requestTimeoutMs: ctx.requestTimeoutMs,
          pollMs: ctx.pollMs,
          signal: link.signal,
          time: (op, fn) => metrics.timeStore(op, fn),
          parked: () => client.parked(),
        });
        answer = waited;
        if (waited.status === 'acquired') grantSentAt = waited.sentAt;
      } finally {
        link.dispose();
      }
    }
  } catch (err) {
    if (isLeaseholdError(err, 'ERR_ABORTED') && client.left) {
      acquireAnswered(metrics, 'cancelled', performance.now() - started);
      // Nobody is listening any more; the answer goes nowhere but completes the request.
      throw new ApiError('unavailable', 'the client went away while waiting');
    }
    acquireAnswered(metrics, 'unavailable', performance.now() - started);
    throw err;
  }
  const elapsedMs = performance.now() - started;
  const waitedMs = Math.round(elapsedMs);
  if (answer.status === 'busy') {
    acquireAnswered(metrics, 'busy', elapsedMs);
    throw new ApiError(
      'busy',
      `${key} is held by ${answer.holder.ownerId} (token ${answer.holder.token}) for ${wholeMs(answer.holder.remainingMs)}ms more`,
      {
        holder: holderJson(answer.holder),
        retryAfterMs: wholeMs(answer.retryAfterMs, 'up'),
        ...(answer.reason === 'lock_delay' ? { reason: 'lock_delay' } : {}),
      },
    );
  }
  acquireAnswered(metrics, 'acquired', elapsedMs);
  const prefix = leaseIdPrefix(leaseId);
  const token = answer.token.toString();
  // A retried acquire with the lease id of a grant this server already made gets that grant
  // back from the store: the same lease, not a new grant, so no second event.
  if (!tracker.knows(key, answer.token, leaseId)) {
    tracker.granted(key, answer.token, ownerId, leaseId, prefix, ttlMs);
    hub.publish({
      type: 'acquired',
      key,
      token,
      ownerId,
      leaseIdPrefix: prefix,
      ttlMs,
      ...(tokenBlock > 1 ? { tokenBlock } : {}),
    });
  }
  if (logger.isLevelEnabled('debug')) {
    logger.debug({ key, ownerId, lease: prefix, token }, 'lease acquired');
  }
  if (client.left) {
    // The client left while we waited: nobody will renew or release this grant, so end it now.
    await releaseGhost(ctx, key, leaseId, answer.token, ownerId, prefix);
    throw new ApiError('unavailable', 'the client went away; its grant was released');
  }
  const acquired: AcquiredJson = {
    status: 'acquired',
    key,
    leaseId,
    token,
    ownerId,
    ttlMs,
    waitedMs,
  };
  if (answer.expiresAtWallMs !== undefined)
    acquired.expiresAtWallMs = wholeMs(answer.expiresAtWallMs);
  if (grantSentAt !== undefined) {
    // Rounded down: a client measures the lease's validity from its own send time plus this.
    acquired.grantSentAfterMs = Math.max(0, Math.floor(grantSentAt - started));
  }
  return acquired;
}

/**
 * The `tokenBlock` of an acquire (1 when absent). Above 1 only over a store that reserves
 * blocks (`capabilities.tokenBlocks`): another store would grant a single token, and the
 * client's local successors would then reuse tokens that later grants also receive. Refused
 * before anything reaches the store.
 */
function validateTokenBlock(ctx: ServerContext, raw: unknown): number {
  if (raw === undefined) return 1;
  const max = LIMITS.maxTokenBlock;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 1 || raw > max) {
    throw invalidArgument('tokenBlock', `must be an integer from 1 to ${max}`, raw);
  }
  if (raw > 1 && ctx.store.capabilities.tokenBlocks !== true) {
    throw invalidArgument(
      'tokenBlock',
      `must be 1 on this server: its ${ctx.store.kind} store cannot reserve token blocks (capabilities.tokenBlocks is false)`,
      raw,
    );
  }
  return raw;
}

/** Counts an acquire's answer and the time it took, by result. */
function acquireAnswered(metrics: ServerMetrics, result: string, elapsedMs: number): void {
  metrics.acquisitions.inc({ result });
  metrics.acquireWait.observe({ result }, elapsedMs / 1000);
}

/** The answer of a grant: what `/v1/acquire` returns. */
export interface AcquiredJson {
  status: 'acquired';
  key: string;
  leaseId: string;
  token: string;
  ownerId: string;
  ttlMs: number;
  waitedMs: number;
  expiresAtWallMs?: number;
  /**
   * After a wait: how long after receiving the request the server sent the store request
   * that granted the lease. The lease is valid at the store from no earlier than that.
   */
  grantSentAfterMs?: number;
}

async function releaseGhost(
  ctx: ServerContext,
  key: string,
  leaseId: string,
  token: bigint,
  ownerId: string,
  prefix: string,
): Promise<void> {
  try {
    const r = await ctx.store.release({ key, leaseId, token }, ctx.storeOptions);
    ctx.tracker.ended(key, token);
    if (r.status === 'released') {
      ctx.hub.publish({
        type: 'released',
        key,
        token: token.toString(),
        ownerId,
        leaseIdPrefix: prefix,
      });
    }
  } catch (err) {
    ctx.logger.warn(
      { key, lease: prefix, err: String(err) },
      'could not release an abandoned grant; it will expire',
    );
  }
}

/**
 * The `lockDelay` of an acquire in ms (0 when absent): up to 1 h, and above 0 only over a
 * store that keeps lock-delays (`capabilities.lockDelay`), which would otherwise be ignored.
 */
function validateLockDelay(ctx: ServerContext, raw: unknown): number {
  if (raw === undefined) return 0;
  const ms = parseDuration('lockDelay', raw);
  if (ms < 0 || ms > 3_600_000) throw invalidArgument('lockDelay', 'must be between 0 and 1h', raw);
  if (ms > 0 && ctx.store.capabilities.lockDelay !== true) {
    throw invalidArgument(
      'lockDelay',
      `is not supported on this server: its ${ctx.store.kind} store keeps no lock-delay (capabilities.lockDelay is false)`,
      raw,
    );
  }
  return ms;
}
