import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalidArgument } from '../core/errors.js';
import { leaseIdPrefix } from '../core/ids.js';
import type { LeaseState } from '../core/types.js';
import { parseToken, validateKey, validatePrefix } from '../core/validate.js';
import { acquireRoute } from './acquire-route.js';
import {
  ANONYMOUS,
  authorizeKey,
  mayRead,
  readablePrefixes,
  type Principal,
} from '../http-service/auth.js';
import { clientWatch } from './client-watch.js';
import type { ServerContext } from './context.js';
import { releaseThroughServer } from './hand-off.js';
import { renewRoute } from './renew-route.js';
import { ApiError } from './http-errors.js';
import { stateJson } from './json.js';
import { ACQUIRE_BODY, LIST_QUERY, RELEASE_BODY, RENEW_BODY } from './schemas.js';

export interface AcquireBody {
  key: unknown;
  ttl: unknown;
  wait?: unknown;
  ownerId?: unknown;
  value?: unknown;
  leaseId?: string;
  tokenBlock?: unknown;
  lockDelay?: unknown;
  ignoreLockDelay?: unknown;
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
