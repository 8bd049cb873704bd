import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isLeaseholdError } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';
import { parseToken, validateKey } from '../../core/validate.js';
import { authorizeKey } from '../../http-service/auth.js';
import { claimDecision } from '../decision.js';
import { FenceHttpError } from '../http/fence-error.js';
import { MARK_HEADER } from '../http/fence-headers.js';
import type { MarkPolicy, ScopeHold } from '../marks/mark-store.js';
import { ADMIN_PREFIX } from './admin-routes.js';
import { sendError } from './error-answers.js';
import type { FencedContext } from './fenced-request.js';
import type { CompiledRoute } from './routes.js';

/** The path of the gateway's claim call. */
export const CLAIM_PATH = `${ADMIN_PREFIX}/claim`;

/** The largest claim body read: `{"scope": …, "token": …}` with a scope of the longest key. */
const MAX_CLAIM_BODY = 4096;

/**
 * `POST /_leasehold/claim` with `{"scope":"report/july","token":"42"}` (claim before start,
 * DESIGN §4): raises the scope's mark to the token without reaching the upstream, in the
 * scope's turn — after the fenced request of the scope in progress has been answered (and,
 * with `scope-lock`, under the scope's PostgreSQL lock) — so that once it answers
 * `200 {"status":"applied",…}`, no request with a lower token is forwarded any more, even
 * before the new owner's first request. It decides by the policy of the scope's routes, as
 * every fence's claim does: applied exactly when a request at the token would pass now. With
 * `"route": "<name>"` in the body, that route's policy; without, the strictest policy of the
 * routes whose scope template could give the scope (`>` if any of them has it), so that a
 * claim never answers `applied` for a token that a `>` route would refuse (its one write
 * spent). A route with policy `>` still lets the claimed token's first request through.
 * `409 stale_fence` (with `Fencing-Mark`): a newer token claimed or wrote; nothing changed.
 * Bad input: 400; auth as for fenced requests (verb `fence` on the scope); a full scope queue
 * 429; the mark store down 503.
 */
export function registerClaimRoute(
  app: FastifyInstance,
  ctx: FencedContext,
  routes: readonly CompiledRoute[],
): void {
  app.post(CLAIM_PATH, async (req, reply) => {
    const { scope, token, route } = parseClaim(await readBody(req));
    if (req.principal !== undefined) authorizeKey(req.principal, 'fence', scope);
    const policy = claimPolicy(routes, scope, route);
    const queued = ctx.queue.run(scope, () =>
      claimInTurn(ctx, req, reply, { scope, token, policy }),
    );
    if (queued === undefined) {
      ctx.metrics.decided('busy', CLAIM_PATH);
      return sendError(
        reply,
        new FenceHttpError('busy', `too many requests wait for scope ${scope}; retry later`, {
          'retry-after': '1',
        }),
      );
    }
    return queued;
  });
}

/**
 * The policy a claim decides by: the named route's, else `>` when any route that could give
 * the scope has it (answering `applied` where a `>` route's request would be refused would
 * let its holder start for nothing), else `>=`.
 */
function claimPolicy(
  routes: readonly CompiledRoute[],
  scope: string,
  name: string | undefined,
): MarkPolicy {
  if (name !== undefined) {
    const route = routes.find((r) => r.name === name);
    if (route === undefined)
      throw new FenceHttpError('invalid_argument', `route: the gateway has no route named ${name}`);
    return route.policy;
  }
  return routes.some((r) => r.policy === '>' && r.mayGive(scope)) ? '>' : '>=';
}

async function claimInTurn(
  ctx: FencedContext,
  req: FastifyRequest,
  reply: FastifyReply,
  { scope, token, policy }: { scope: string; token: bigint; policy: MarkPolicy },
): Promise<FastifyReply> {
  if (req.raw.socket === null || req.raw.socket.destroyed) return reply;
  let hold: ScopeHold | undefined;
  let r: ClaimResult;
  try {
    if (ctx.replicas === 'scope-lock') hold = await ctx.marks.holdScope?.(scope);
    r = await ctx.marks.claim(scope, token, policy);
  } catch (err) {
    if (!isLeaseholdError(err)) throw err;
    ctx.metrics.decided('unavailable', CLAIM_PATH);
    ctx.logger.warn(
      { scope, token: token.toString(), err: err.message },
      'claim: mark store failed',
    );
    return sendError(
      reply,
      new FenceHttpError('unavailable', 'the mark store is unavailable; nothing was claimed'),
    );
  } finally {
    if (hold !== undefined) await hold.release();
  }
  ctx.metrics.decided(r.status, CLAIM_PATH);
  ctx.logger.info({ scope, token: token.toString(), result: r.status }, 'claim');
  ctx.reporter?.onDecision(claimDecision(scope, token, r));
  if (r.status === 'stale_fence')
    return sendError(
      reply,
      new FenceHttpError(
        'stale_fence',
        `token ${token} is below the scope's mark ${r.highWaterMark}; a newer holder has claimed or written`,
        { [MARK_HEADER]: r.highWaterMark.toString() },
      ),
    );
  return reply
    .type('application/json; charset=utf-8')
    .send({ status: 'applied', scope, token: token.toString() });
}

/** The request body as text, at most {@link MAX_CLAIM_BODY} bytes (the gateway parses none). */
async function readBody(req: FastifyRequest): Promise<string> {
  const body = req.body as AsyncIterable<Buffer | string> | undefined;
  if (body === undefined || body === null) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += b.length;
    if (size > MAX_CLAIM_BODY)
      throw new FenceHttpError(
        'payload_too_large',
        `a claim body is at most ${MAX_CLAIM_BODY} bytes`,
        { connection: 'close' },
      );
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * `{"scope": string, "token": decimal string, "route"?: string}`, checked; 400 naming the
 * field otherwise.
 */
function parseClaim(text: string): { scope: string; token: bigint; route: string | undefined } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new FenceHttpError(
      'invalid_argument',
      'the body must be JSON {"scope": "…", "token": "…"}',
    );
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new FenceHttpError(
      'invalid_argument',
      'the body must be JSON {"scope": "…", "token": "…"}',
    );
  const { scope, token, route } = json as Record<string, unknown>;
  if (route !== undefined && typeof route !== 'string')
    throw new FenceHttpError('invalid_argument', 'route must be the name of one of the routes');
  if (typeof token !== 'string')
    throw new FenceHttpError(
      'invalid_argument',
      'token must be a decimal string from 1 to 9223372036854775807 (never a JSON number)',
    );
  try {
    return { scope: validateKey(scope, 'scope'), token: parseToken(token, 'token'), route };
  } catch (err) {
    throw new FenceHttpError('invalid_argument', (err as Error).message);
  }
}
