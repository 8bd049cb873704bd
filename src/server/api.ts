import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalidArgument } from '../core/errors.js';
import { leaseIdPrefix } from '../core/ids.js';
import type { LeaseState } from '../core/types.js';
import { parseToken, validateKey, validatePrefix, validateTtl } from '../core/validate.js';
import { acquireRoute } from './acquire-route.js';
import { ANONYMOUS, authorizeKey, mayRead, readablePrefixes, type Principal } from './auth.js';
import { clientWatch } from './client-watch.js';
import type { ServerContext } from './context.js';
import { releaseThroughServer } from './hand-off.js';
import { ApiError } from './http-errors.js';
import { stateJson, wholeMs } from './json.js';
import { ACQUIRE_BODY, LIST_QUERY, RELEASE_BODY, RENEW_BODY } from './schemas.js';

export interface AcquireBody {
  key: unknown;
  ttl: unknown;
  wait?: unknown;
  ownerId?: unknown;
  value?: unknown;
  leaseId?: string;
  tokenBlock?: unknown;
}
export interface RenewBody {
  key: unknown;
  leaseId: string;
  token: unknown;
  ttl: unknown;
}
export interface ReleaseBody {
  key: unknown;
  leaseId: string;
  token: unknown;
}

export function principalOf(req: FastifyRequest): Principal {
  return req.principal ?? ANONYMOUS;
}

/** Registers the lease routes of `/v1`: acquire, renew, release, get, list. */
export function registerLeaseRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { store, metrics } = ctx;
  const auth = { auth: true };

  app.post('/v1/acquire', { schema: { body: ACQUIRE_BODY }, config: auth }, async (req, reply) => {
    const b = req.body as AcquireBody;
    const key = validateKey(b.key, 'key');
    return acquireRoute(ctx, principalOf(req), clientWatch(reply), key, b);
  });

  app.post('/v1/renew', { schema: { body: RENEW_BODY }, config: auth }, async (req) =>
    renewRoute(ctx, principalOf(req), req.body as RenewBody),
  );

  app.post('/v1/release', { schema: { body: RELEASE_BODY }, config: auth }, async (req) => {
    const b = req.body as ReleaseBody;
    const key = validateKey(b.key, 'key');
    return releaseRoute(ctx, principalOf(req), key, b.leaseId, b.token, 'token');
  });

  app.get('/v1/leases/*', { config: auth }, async (req) => {
    const raw = (req.params as Record<string, string>)['*'];
    const key = validateKey(raw, 'key');
    const principal = principalOf(req);
    if (!mayRead(principal, key)) {
      throw new ApiError(
        'permission_denied',
        `token ${principal.name} may not read ${JSON.stringify(key)}`,
      );
    }
    const state = await metrics.timeStore('inspect', () => store.inspect(key, ctx.storeOptions));
    return stateJson(state);
  });

  app.get('/v1/leases', { schema: { querystring: LIST_QUERY }, config: auth }, async (req) => {
    const q = req.query as { prefix?: string; limit?: string };
    const prefix = validatePrefix(q.prefix ?? '', 'prefix');
    const limit = q.limit === undefined ? 1000 : Number(q.limit);
    if (limit > 10_000) throw invalidArgument('limit', 'must be from 1 to 10000', q.limit);
    const prefixes = readablePrefixes(principalOf(req), prefix);
    const lists = await Promise.all(
      prefixes.map((p) => metrics.timeStore('list', () => store.list(p, limit, ctx.storeOptions))),
    );
    const byKey = new Map<string, LeaseState>();
    for (const list of lists) for (const s of list) byKey.set(s.key, s);
    const leases = [...byKey.values()]
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .slice(0, limit)
      .map(stateJson);
    return { leases };
  });
}

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
): Promise<{ status: 'renewed'; expiresAtWallMs?: number }> {
  const { store, metrics, hub, tracker } = ctx;
  const key = validateKey(b.key, 'key');
  authorizeKey(principal, 'renew', key);
  const token = parseToken(b.token, 'token');
  const ttlMs = validateTtl(b.ttl, store.capabilities.minTtlMs, 'ttl');
  const leaseId = b.leaseId.toLowerCase();
  let answer;
  const started = performance.now();
  try {
    answer = await store.renew({ key, leaseId, token, ttlMs }, ctx.storeOptions);
  } catch (err) {
    metrics.storeRequestDone('renew', false, started);
    metrics.renewals.inc({ result: 'unavailable' });
    throw err;
  }
  metrics.storeRequestDone('renew', true, started);
  const prefix = leaseIdPrefix(leaseId);
  if (answer.status === 'renewed') {
    metrics.renewals.inc({ result: 'renewed' });
    tracker.renewed(key, token, ttlMs);
    hub.publish({ type: 'renewed', key, token: token.toString(), leaseIdPrefix: prefix, ttlMs });
    const renewed: { status: 'renewed'; expiresAtWallMs?: number } = { status: 'renewed' };
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
  if (heldMs !== undefined) {
    metrics.leasesLost.inc({ reason: 'renew_lost' });
    metrics.timeHeld.observe({ end: 'lost' }, heldMs / 1000);
    hub.publish({ type: 'lost', key, token: token.toString(), leaseIdPrefix: prefix });
  }
  throw new ApiError(
    'lost',
    `the lease on ${key} with token ${token} is lost (expired or taken over)`,
  );
}

/**
 * The release operation shared by `POST /v1/release` and `POST /v1/elections/{name}/resign`:
 * authorise `release` on `key`, release conditionally on lease id and token, publish it.
 */
export async function releaseRoute(
  ctx: ServerContext,
  principal: Principal,
  key: string,
  rawLeaseId: string,
  rawToken: unknown,
  tokenField: string,
): Promise<{ status: 'released' }> {
  const { metrics, hub, tracker, logger } = ctx;
  authorizeKey(principal, 'release', key);
  const token = parseToken(rawToken, tokenField);
  const leaseId = rawLeaseId.toLowerCase();
  let answer;
  try {
    answer = await releaseThroughServer(ctx, { key, leaseId, token });
  } catch (err) {
    metrics.releases.inc({ result: 'unavailable' });
    throw err;
  }
  metrics.releases.inc({ result: answer.status });
  if (answer.status === 'not_owner') {
    answer.wake?.();
    throw new ApiError(
      'not_owner',
      `no live lease on ${key} with this lease id and token ${token}`,
    );
  }
  const prefix = leaseIdPrefix(leaseId);
  const heldMs = tracker.ended(key, token);
  if (heldMs !== undefined) metrics.timeHeld.observe({ end: 'released' }, heldMs / 1000);
  const tokenText = token.toString();
  hub.publish({ type: 'released', key, token: tokenText, leaseIdPrefix: prefix });
  // After the release is published: the waiter's grant is published when it answers.
  answer.wake?.();
  if (logger.isLevelEnabled('debug')) {
    logger.debug({ key, lease: prefix, token: tokenText }, 'lease released');
  }
  return { status: 'released' };
}
