import { leaseIdPrefix } from '../core/ids.js';
import {
  isBatchRenewingLeaseStore,
  type StoreRenewRequest,
  type StoreRenewResult,
} from '../core/store.js';
import { parseToken, validateKey, validateTtl } from '../core/validate.js';
import type { RenewBody } from './api.js';
import { authorizeKey, type Principal } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import { ApiError } from './http-errors.js';
import { wholeMs } from './json.js';

/** What a granted renewal answers. */
export type RenewedBody = { status: 'renewed'; expiresAtWallMs?: number };

/**
 * The renew operation of `POST /v1/renew` and of a batch: authorise `renew` on the key, renew
 * conditionally on lease id and token, publish it. A refused renewal answers `not_owner` when
 * the token's lease is still live (someone else's token with a wrong lease id) or the token was
 * never granted for the key, else `lost`; only the holder's own refused renewal of a lease
 * granted through this server is published (`lost`).
 */
export async function renewRoute(
  ctx: ServerContext,
  principal: Principal,
  b: RenewBody,
): Promise<RenewedBody> {
  const lease = renewalOf(ctx, principal, b);
  const { store, metrics } = ctx;
  let answer;
  const started = performance.now();
  try {
    answer = await store.renew(lease, ctx.storeOptions);
  } catch (err) {
    metrics.storeRequestDone('renew', false, started);
    metrics.renewals.inc({ result: 'unavailable' });
    throw err;
  }
  metrics.storeRequestDone('renew', true, started);
  return renewAnswer(ctx, lease, answer);
}

/**
 * The renew operations of one `POST /v1/batch`, as one `renewMany` call on a store that has
 * it: one store round trip for the batch, each renewal still answered (and published) as its
 * own request would be. An operation that fails validation or authorisation answers its own
 * error and is not sent; a second renewal of a key already in the call (the store's contract:
 * a key at most once per call) and every renewal on a store without `renewMany` go one by one.
 * Returns one promise per body, in order.
 */
export function renewTogether(
  ctx: ServerContext,
  principal: Principal,
  bodies: readonly RenewBody[],
): Array<Promise<RenewedBody>> {
  const { store, metrics } = ctx;
  if (bodies.length < 2 || !isBatchRenewingLeaseStore(store)) {
    return bodies.map((b) => renewRoute(ctx, principal, b));
  }
  const out: Array<Promise<RenewedBody>> = new Array<Promise<RenewedBody>>(bodies.length);
  const together: Array<{ at: number; lease: StoreRenewRequest }> = [];
  const keys = new Set<string>();
  bodies.forEach((b, at) => {
    let lease: StoreRenewRequest;
    try {
      lease = renewalOf(ctx, principal, b);
    } catch (err) {
      // Its own error (invalid_argument, permission_denied), as its own request answers.
      out[at] = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (keys.has(lease.key)) {
      out[at] = renewRoute(ctx, principal, b);
      return;
    }
    keys.add(lease.key);
    together.push({ at, lease });
  });
  if (together.length === 0) return out;
  const started = performance.now();
  const call = store
    .renewMany(
      together.map((t) => t.lease),
      ctx.storeOptions,
    )
    .then(
      (results) => {
        if (results.length !== together.length) {
          throw new Error(`renewMany answered ${results.length} of ${together.length} leases`);
        }
        metrics.storeRequestDone('renew_many', true, started);
        return results;
      },
      (err: unknown) => {
        metrics.storeRequestDone('renew_many', false, started);
        throw err;
      },
    );
  together.forEach(({ at, lease }, k) => {
    out[at] = call.then(
      (results) => {
        const r = results[k]!;
        if (r.status === 'unanswered') {
          // This operation's own failure: answered as its own request's error would be.
          metrics.renewals.inc({ result: 'unavailable' });
          throw r.error;
        }
        return renewAnswer(ctx, lease, r);
      },
      (err: unknown) => {
        metrics.renewals.inc({ result: 'unavailable' });
        throw err;
      },
    );
  });
  // Every promise has a handler (its operation's result); a failed call must not go unhandled.
  call.catch(() => undefined);
  return out;
}

/** Validates and authorises one renew body: the store request it asks for. */
function renewalOf(ctx: ServerContext, principal: Principal, b: RenewBody): StoreRenewRequest {
  const key = validateKey(b.key, 'key');
  authorizeKey(principal, 'renew', key);
  const token = parseToken(b.token, 'token');
  const ttlMs = validateTtl(b.ttl, ctx.store.capabilities.minTtlMs, 'ttl');
  return { key, leaseId: b.leaseId.toLowerCase(), token, ttlMs };
}

/** The store's answer to one renewal as the operation's answer, with its metrics and events. */
async function renewAnswer(
  ctx: ServerContext,
  lease: StoreRenewRequest,
  answer: StoreRenewResult,
): Promise<RenewedBody> {
  const { store, metrics, hub, tracker } = ctx;
  const { key, leaseId, token, ttlMs } = lease;
  const prefix = leaseIdPrefix(leaseId);
  if (answer.status === 'renewed') {
    metrics.renewals.inc({ result: 'renewed' });
    tracker.renewed(key, token, ttlMs);
    hub.publish({ type: 'renewed', key, token: token.toString(), leaseIdPrefix: prefix, ttlMs });
    const renewed: RenewedBody = { status: 'renewed' };
    if (answer.expiresAtWallMs !== undefined)
      renewed.expiresAtWallMs = wholeMs(answer.expiresAtWallMs);
    return renewed;
  }
  // The store refused: it changed nothing. If that token's lease is still live, the caller
  // presented someone else's token with a wrong lease id; if the key never had that token, it
  // was never granted: both not_owner, and no event. Otherwise the lease is gone for good, but
  // only the holder's own renewal of a lease granted here (same lease id and token) makes a
  // `lost` event: anyone may send a renew, and events describe only what the store did.
  const state = await metrics.timeStore('inspect', () => store.inspect(key, ctx.storeOptions));
  if (state.holder !== undefined && state.holder.token === token) {
    metrics.renewals.inc({ result: 'not_owner' });
    throw new ApiError('not_owner', `no lease on ${key} with this lease id and token ${token}`);
  }
  if (token > state.lastToken) {
    metrics.renewals.inc({ result: 'not_owner' });
    throw new ApiError('not_owner', `no lease on ${key} was ever granted token ${token}`);
  }
  metrics.renewals.inc({ result: 'lost' });
  const heldMs = tracker.lost(key, token, leaseId);
  // A store that changed incarnation says so (decision 042): the event and metric carry it.
  const reason = answer.reason;
  if (heldMs !== undefined) {
    metrics.leasesLost.inc({ reason: reason ?? 'renew_lost' });
    metrics.timeHeld.observe({ end: 'lost' }, heldMs / 1000);
    hub.publish({
      type: 'lost',
      key,
      token: token.toString(),
      leaseIdPrefix: prefix,
      ...(reason === undefined ? {} : { reason }),
    });
  }
  throw new ApiError(
    'lost',
    reason === undefined
      ? `the lease on ${key} with token ${token} is lost (expired or taken over)`
      : `the lease on ${key} with token ${token} is lost: the store changed incarnation (${reason}) and raised its token epoch`,
  );
}
