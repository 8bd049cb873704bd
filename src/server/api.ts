import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidArgument, isLeaseholdError } from '../core/errors.js';
import { leaseIdPrefix, newLeaseId } from '../core/ids.js';
import type { StoreAcquireRequest } from '../core/store.js';
import type { LeaseState } from '../core/types.js';
import {
  LIMITS,
  parseToken,
  validateKey,
  validateOwnerId,
  validatePrefix,
  validateTtl,
  validateValue,
  validateWait,
} from '../core/validate.js';
import { acquireWaiting } from './acquire-wait.js';
import { ANONYMOUS, authorizeKey, mayRead, readablePrefixes, type Principal } from './auth.js';
import type { ServerContext } from './context.js';
import { ApiError } from './http-errors.js';
import type { ServerMetrics } from './metrics.js';
import { holderJson, stateJson, wholeMs } from './json.js';
import { linkSignals } from '../core/runtime/signals.js';
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

/** Whether the HTTP client of a request went away before its answer was sent. */
export interface ClientWatch {
  readonly left: boolean;
  signal(): AbortSignal;
}

/**
 * Watches for the HTTP client going away before its answer is sent: `left` turns true, and
 * `signal()` fires. Nothing is registered per request: `left` reads the response's state
 * (Node marks a response destroyed when it emits `close`, and only a response whose client
 * left is destroyed before it finished), and the `close` listener and AbortController are made
 * on the first `signal()` (most acquisitions never wait; a listener or an AbortController per
 * request is measurable).
 */
export function clientWatch(reply: FastifyReply): ClientWatch {
  return new ResponseWatch(reply.raw);
}

class ResponseWatch implements ClientWatch {
  private ac: AbortController | undefined;

  constructor(private readonly res: ServerResponse) {}

  get left(): boolean {
    return this.res.destroyed && !this.res.writableFinished;
  }

  signal(): AbortSignal {
    if (this.ac === undefined) {
      const ac = new AbortController();
      this.ac = ac;
      if (this.left) ac.abort(new Error('client went away'));
      else {
        this.res.once('close', () => {
          if (!this.res.writableFinished) ac.abort(new Error('client went away'));
        });
      }
    }
    return this.ac.signal;
  }
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
  const { store, metrics, hub, tracker, logger } = ctx;
  authorizeKey(principal, 'release', key);
  const token = parseToken(rawToken, tokenField);
  const leaseId = rawLeaseId.toLowerCase();
  let answer;
  const started = performance.now();
  try {
    answer = await store.release({ key, leaseId, token }, ctx.storeOptions);
  } catch (err) {
    metrics.storeRequestDone('release', false, started);
    metrics.releases.inc({ result: 'unavailable' });
    throw err;
  }
  metrics.storeRequestDone('release', true, started);
  metrics.releases.inc({ result: answer.status });
  if (answer.status === 'not_owner') {
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
  if (logger.isLevelEnabled('debug')) {
    logger.debug({ key, lease: prefix, token: tokenText }, 'lease released');
  }
  return { status: 'released' };
}

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
  const request: StoreAcquireRequest =
    tokenBlock > 1
      ? { key, leaseId, ownerId, ttlMs, value, tokenBlock }
      : { key, leaseId, ownerId, ttlMs, value };
  let answer;
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
        answer = await acquireWaiting(ctx.store, ctx.waiting, request, {
          waitMs,
          requestTimeoutMs: ctx.requestTimeoutMs,
          pollMs: ctx.pollMs,
          signal: link.signal,
          time: (op, fn) => metrics.timeStore(op, fn),
        });
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
      { holder: holderJson(answer.holder), retryAfterMs: wholeMs(answer.retryAfterMs, 'up') },
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
