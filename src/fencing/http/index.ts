import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidArgument } from '../../core/errors.js';
import { SAFE_METHODS } from '../gateway/routes.js';
import { REPLAYED_HEADER, captureAnswer } from './answer-replay.js';
import { VERSION_HEADER } from './fence-headers.js';
import { HttpFence, type HttpFenceEntry, type HttpFenceOptions } from './http-fence.js';

export { HttpFence, type HttpFenceEntry, type HttpFenceOptions } from './http-fence.js';
export {
  MARK_HEADER,
  VERSION_HEADER,
  FENCE_HEADERS,
  type FenceHeaderNames,
} from './fence-headers.js';
export type { FenceErrorCode } from './fence-error.js';
export { GatewayClaimClient, type GatewayClaimClientOptions } from './gateway-claim-client.js';
export { REPLAYED_HEADER, REPLAYED_ANSWER_HEADERS, captureAnswer } from './answer-replay.js';
export { openMarkStore } from '../marks/open-mark-store.js';
export type { AnswerRecord, MarkStore, MarkPolicy } from '../marks/mark-store.js';

/** Options of {@link createFenceMiddleware} and {@link fencingPlugin}. */
export interface FenceMiddlewareOptions<Req> extends HttpFenceOptions {
  /**
   * The fencing scope of a request, or undefined for requests that are not fenced. Only
   * methods other than GET, HEAD, OPTIONS and TRACE are asked.
   */
  readonly scope: (req: Req) => string | undefined;
}

function checkScope(value: unknown): void {
  if (typeof value !== 'function')
    throw invalidArgument('scope', 'must be a function of the request', value);
}

type Refused = Extract<HttpFenceEntry, { status: 'refused' }>;
type Replayed = Extract<HttpFenceEntry, { status: 'replay' }>;

function answer(res: ServerResponse, e: Refused | Replayed): void {
  res.statusCode = e.httpStatus;
  for (const [k, v] of Object.entries(e.headers)) res.setHeader(k, v);
  if (e.status === 'replay') res.setHeader(REPLAYED_HEADER, 'true');
  else res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(e.body);
}

/** Frees the scope when the response is over, with what was answered when it is to be kept. */
function whenOver(res: ServerResponse, entry: Extract<HttpFenceEntry, { status: 'pass' }>): void {
  if (entry.capture) void captureAnswer(res).then((a) => entry.done(a));
  else res.once('close', () => entry.done(res.statusCode));
}

/** Enters `scope` (undefined: the request is not fenced). */
function enterScope(
  fence: HttpFence,
  scope: string | undefined,
  headers: IncomingMessage['headers'],
): Promise<HttpFenceEntry | undefined> {
  return scope === undefined ? Promise.resolve(undefined) : fence.enter(scope, headers);
}

/**
 * The middleware of {@link createFenceMiddleware}: a connect-style function, with the
 * {@link HttpFence} it decides by, whose `claim(scope, token)` installs a new owner's token
 * in the same per-scope order as the requests (claim before start).
 */
export type FenceMiddleware<Req extends IncomingMessage = IncomingMessage> = ((
  req: Req,
  res: ServerResponse,
  next: (err?: unknown) => void,
) => void) & { readonly fence: HttpFence };

/**
 * A connect/Express-style middleware `(req, res, next)` that enforces fencing tokens in your
 * own Node service: a fenced request runs only after its token passed the durable mark of its
 * scope (committed first), one request per scope at a time in this process; stale ones get
 * 409 `stale_fence` (`{ "error": { "code", "message" } }`) and your handler never runs. Its
 * `fence.claim(scope, token)` raises a scope's mark for a new owner before its first request.
 *
 * @example
 * const marks = await openMarkStore('sqlite:./marks.db');
 * app.use(createFenceMiddleware({ marks, scope: (req) => req.url?.startsWith('/reports/') ? `report/${req.url.slice(9)}` : undefined }));
 */
export function createFenceMiddleware<Req extends IncomingMessage = IncomingMessage>(
  options: FenceMiddlewareOptions<Req>,
): FenceMiddleware<Req> {
  checkScope(options.scope);
  const fence = new HttpFence(options);
  const middleware = (req: Req, res: ServerResponse, next: (err?: unknown) => void): void => {
    if (SAFE_METHODS.has(req.method ?? 'GET')) return next();
    // Express strips a mount prefix from req.url; originalUrl is the target as received.
    const bad = fence.refuseTarget((req as { originalUrl?: string }).originalUrl ?? req.url);
    if (bad !== undefined) return answer(res, bad);
    let scope: string | undefined;
    try {
      scope = options.scope(req);
    } catch (err) {
      return next(err);
    }
    if (scope === undefined) return next();
    void fence.enter(scope, req.headers).then((entry) => {
      if (entry.status !== 'pass') return answer(res, entry);
      whenOver(res, entry);
      if (entry.version !== undefined) res.setHeader(VERSION_HEADER, entry.version.toString());
      next();
    });
  };
  return Object.assign(middleware, { fence });
}

/**
 * The same check as a Fastify plugin (a `preHandler` hook on every route of the instance it is
 * registered on; it is not encapsulated).
 *
 * @example
 * await app.register(fencingPlugin, { marks, scope: (req) => (req.params as { id?: string }).id && `report/${(req.params as { id: string }).id}` });
 */
export const fencingPlugin = Object.assign(
  async (app: FastifyInstance, options: FenceMiddlewareOptions<FastifyRequest>): Promise<void> => {
    checkScope(options.scope);
    const fence = new HttpFence(options);
    app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
      if (SAFE_METHODS.has(req.method)) return;
      const entry =
        fence.refuseTarget(req.raw.url) ??
        (await enterScope(fence, options.scope(req), req.headers));
      if (entry === undefined) return;
      if (entry.status === 'refused') {
        for (const [k, v] of Object.entries(entry.headers)) void reply.header(k, v);
        return reply
          .code(entry.httpStatus)
          .type('application/json; charset=utf-8')
          .send(entry.body);
      }
      if (entry.status === 'replay')
        return reply
          .code(entry.httpStatus)
          .headers(entry.headers)
          .header(REPLAYED_HEADER, 'true')
          .send(entry.body);
      whenOver(reply.raw, entry);
      if (entry.version !== undefined) void reply.header(VERSION_HEADER, entry.version.toString());
    });
    await Promise.resolve();
  },
  // Applies to the instance it is registered on, like fastify-plugin's skip-override.
  { [Symbol.for('skip-override')]: true },
);
