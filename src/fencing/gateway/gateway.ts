import type { AddressInfo, Socket } from 'node:net';
import { Transform } from 'node:stream';
import replyFrom from '@fastify/reply-from';
import {
  fastify,
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { pino } from 'pino';
import { invalidArgument, isLeaseholdError } from '../../core/errors.js';
import { Authenticator, authorizeKey, type Principal } from '../../server/auth.js';
import { ApiError } from '../../server/http-errors.js';
import { createFenceReporter, type FenceReporter } from '../../stores/http/fence-reporter.js';
import { FenceHttpError, fenceErrorBody, toFenceHttpError } from '../http/fence-error.js';
import { headerName, resolveHeaderNames, type FenceHeaderNames } from '../http/fence-headers.js';
import type { MarkStore } from '../marks/mark-store.js';
import { openMarkStore } from '../marks/open-mark-store.js';
import { ScopeQueue } from '../scope-queue.js';
import { handleFenced, type FencedContext } from './fenced-request.js';
import { FORWARD_ID_HEADER, UpstreamPool, type ForwardOutcome } from './forward.js';
import { GatewayMetrics } from './metrics.js';
import { compileRoute, matchRequest, type CompiledRoute } from './routes.js';
import { GATEWAY_DEFAULTS, int, type GatewayOptions } from './options.js';

export { GATEWAY_DEFAULTS, type GatewayOptions } from './options.js';

/** A running (or ready) fencing gateway. */
export interface Gateway {
  readonly app: FastifyInstance;
  readonly marks: MarkStore;
  readonly metrics: GatewayMetrics;
  /** Starts listening; resolves with the base URL. */
  listen(): Promise<string>;
  readonly url: string | undefined;
  /** Stops accepting, lets in-flight forwards finish, closes the pool, the reporter and the marks it opened. */
  close(): Promise<void>;
}

/** Path prefix of the gateway's own endpoints (health, metrics, marks). */
export const ADMIN_PREFIX = '/_leasehold';

/**
 * Creates the HTTP fencing gateway: a reverse proxy that checks each fenced request's token
 * against a durable per-scope high-water mark, commits the advance, and only then forwards it
 * (`@fastify/reply-from` over an undici keep-alive pool, bodies streamed). Stale requests get
 * 409 `stale_fence` and never reach the upstream; requests of one scope are forwarded one at a
 * time. Every error answer is `{ "error": { "code", "message" } }`.
 *
 * @example
 * const gw = await createGateway({
 *   upstream: 'http://127.0.0.1:9000',
 *   routes: [{ methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' }],
 * });
 * console.log(await gw.listen());
 */
export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  if (typeof options !== 'object' || options === null)
    throw invalidArgument('options', 'must be an object', options);
  let upstream: URL;
  try {
    upstream = new URL(options.upstream);
  } catch {
    throw invalidArgument('upstream', 'must be an http:// or https:// URL', options.upstream);
  }
  if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:')
    throw invalidArgument('upstream', 'must be an http:// or https:// URL', options.upstream);
  if (!Array.isArray(options.routes))
    throw invalidArgument('routes', 'must be a list', options.routes);
  const routes: CompiledRoute[] = options.routes.map((r, i) => compileRoute(r, `routes[${i}]`));
  const unmatched = options.unmatched ?? 'refuse';
  if (unmatched !== 'refuse' && unmatched !== 'forward')
    throw invalidArgument('unmatched', 'must be refuse or forward', unmatched);
  const replicas = options.replicas ?? 'single';
  if (replicas !== 'single' && replicas !== 'scope-lock')
    throw invalidArgument('replicas', 'must be single or scope-lock', replicas);
  const port = int('port', options.port, GATEWAY_DEFAULTS.port, 0, 65535);
  const timeoutMs = int(
    'upstreamTimeoutMs',
    options.upstreamTimeoutMs,
    GATEWAY_DEFAULTS.upstreamTimeoutMs,
    1,
    600_000,
  );
  const maxQueue = int(
    'maxQueuePerScope',
    options.maxQueuePerScope,
    GATEWAY_DEFAULTS.maxQueuePerScope,
    0,
    100_000,
  );
  const maxBody = int(
    'maxBodyBytes',
    options.maxBodyBytes,
    GATEWAY_DEFAULTS.maxBodyBytes,
    0,
    2 ** 40,
  );
  const maxUrl = int(
    'maxUrlLength',
    options.maxUrlLength,
    GATEWAY_DEFAULTS.maxUrlLength,
    16,
    65_536,
  );
  const connections = int(
    'upstreamConnections',
    options.upstreamConnections,
    GATEWAY_DEFAULTS.upstreamConnections,
    1,
    10_000,
  );
  const h = options.headers ?? {};
  const names: FenceHeaderNames = resolveHeaderNames(h);
  const forwardToken = headerName('headers.forwardToken', h.forwardToken, names.token);
  const auth = new Authenticator(options.auth);
  const logger =
    options.logger ??
    pino(
      {
        level: options.logLevel ?? 'info',
        base: { service: 'leasehold-gateway' },
        redact: ['req.headers.authorization', 'headers.authorization'],
      },
      pino.destination(2),
    );

  const ownMarks = typeof options.marks !== 'object';
  const marks: MarkStore =
    typeof options.marks === 'object'
      ? options.marks
      : await openMarkStore(options.marks ?? GATEWAY_DEFAULTS.marks);
  if (replicas === 'scope-lock' && marks.holdScope === undefined) {
    if (ownMarks) await marks.close();
    throw invalidArgument(
      'replicas',
      `scope-lock needs PostgreSQL marks (${marks.kind} cannot hold a scope across processes)`,
      replicas,
    );
  }
  if (marks.kind === 'redis' && replicas === 'single')
    logger.warn(
      'Redis marks: run one gateway per scope; two gateways on one scope can forward out of order (see docs/gateway.md)',
    );

  const reporter: FenceReporter | undefined =
    options.report === undefined
      ? undefined
      : createFenceReporter({
          url: options.report.url,
          ...(options.report.apiToken === undefined ? {} : { apiToken: options.report.apiToken }),
          ...(options.report.resource === undefined ? {} : { resource: options.report.resource }),
          onError: (err) => logger.warn({ err: err.message }, 'fence decision report failed'),
        });
  const queue = new ScopeQueue(maxQueue);
  const metrics = new GatewayMetrics({
    marksKind: marks.kind,
    defaultMetrics: options.processMetrics,
    inFlight: () => queue.total,
  });
  const pool = new UpstreamPool(upstream.origin, {
    connections,
    keepAliveTimeout: 4000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    ...(upstream.protocol === 'https:'
      ? {
          connect: {
            ...(options.upstreamTls?.ca === undefined ? {} : { ca: options.upstreamTls.ca }),
            rejectUnauthorized: options.upstreamTls?.rejectUnauthorized ?? true,
          },
        }
      : {}),
  });
  const basePath = upstream.pathname.replace(/\/$/, '');

  const app = fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: (parent) => parent,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    exposeHeadRoutes: false,
    routerOptions: { ignoreDuplicateSlashes: false, maxParamLength: 65_536 },
    ...(options.tls ? { https: { cert: options.tls.cert, key: options.tls.key } } : {}),
    clientErrorHandler: (err: Error & { code?: string }, socket: Socket) => {
      if (!socket.writable) return socket.destroy();
      const e = toFenceHttpError(err);
      const body = fenceErrorBody(e.code, e.message);
      socket.end(
        `HTTP/1.1 ${e.status} ${e.code}\r\nContent-Type: application/json; charset=utf-8\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    },
  }) as unknown as FastifyInstance;

  const sendError = (reply: FastifyReply, e: FenceHttpError): FastifyReply => {
    for (const [k, v] of Object.entries(e.headers)) void reply.header(k, v);
    return reply
      .code(e.status)
      .type('application/json; charset=utf-8')
      .send(fenceErrorBody(e.code, e.message));
  };
  app.setErrorHandler((err, req, reply) => {
    let e: FenceHttpError;
    if (err instanceof ApiError)
      e = new FenceHttpError(
        err.code === 'unauthenticated' ? 'unauthenticated' : 'permission_denied',
        err.message,
      );
    else if (isLeaseholdError(err, 'ERR_UNAVAILABLE'))
      e = new FenceHttpError('unavailable', 'the mark store is unavailable');
    else e = toFenceHttpError(err);
    if (e.code === 'internal') logger.error({ err, reqId: req.id }, 'internal error');
    return sendError(reply, e);
  });
  app.setNotFoundHandler((req, reply) =>
    sendError(
      reply,
      new FenceHttpError(
        'not_found',
        `no route ${req.method} ${req.url.split('?')[0]?.slice(0, 200)}`,
      ),
    ),
  );
  // Bodies are streamed to the upstream as they arrive, never parsed.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (req, payload, done) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > maxBody)
      return done(
        new FenceHttpError('payload_too_large', `request body is larger than ${maxBody} bytes`),
        undefined,
      );
    // A declared length within the limit is enforced by Node's parser: no counting needed.
    if (
      req.headers['content-length'] !== undefined &&
      req.headers['transfer-encoding'] === undefined
    ) {
      done(null, payload);
      return;
    }
    let seen = 0;
    const limit = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        seen += chunk.length;
        if (seen > maxBody)
          cb(
            new FenceHttpError('payload_too_large', `request body is larger than ${maxBody} bytes`),
          );
        else cb(null, chunk);
      },
    });
    payload.on('error', (err) => limit.destroy(err));
    done(null, payload.pipe(limit));
  });

  app.decorateRequest('principal', undefined);
  app.addHook('onRequest', (req, reply, done) => {
    if (req.url.length > maxUrl)
      return done(
        new FenceHttpError('uri_too_long', `request URL is longer than ${maxUrl} characters`),
      );
    if (auth.enabled && req.url !== `${ADMIN_PREFIX}/healthz`) {
      try {
        req.principal = auth.authenticate(req.headers.authorization);
      } catch (err) {
        return done(err as Error);
      }
    }
    done();
  });

  await app.register(replyFrom, {
    base: upstream.origin,
    undici: pool.dispatcher as never,
    retryMethods: [],
    disableRequestLogging: true,
  });

  const forward = (
    req: FastifyRequest,
    reply: FastifyReply,
    how: { token?: bigint; capture: boolean; signal?: AbortSignal; version?: bigint },
  ): Promise<ForwardOutcome> => {
    const tracked = pool.track(how.capture, how.signal);
    const source = basePath + req.url;
    reply.from(source, {
      timeout: timeoutMs,
      rewriteRequestHeaders: (_req, headers) => {
        const out: Record<string, string | string[] | undefined> = {
          ...headers,
          [FORWARD_ID_HEADER]: tracked.id,
        };
        // The gateway's own bearer secret never travels further. (undefined rather than
        // delete: undici skips such headers, and the object keeps its fast shape.)
        if (auth.enabled) out['authorization'] = undefined;
        if (how.token !== undefined) {
          out[names.token] = undefined;
          out[forwardToken] = how.token.toString();
        }
        return out;
      },
      onResponse: (_req, rep, res) => {
        if (how.version !== undefined) void rep.header('fencing-version', how.version.toString());
        void rep.send(res.stream);
      },
      onError: (rep, { error }) => {
        const code = (error as { code?: unknown }).code;
        const e =
          code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT'
            ? new FenceHttpError(
                'gateway_timeout',
                `the upstream did not answer within ${timeoutMs} ms`,
              )
            : new FenceHttpError(
                'bad_gateway',
                'the upstream could not be reached or broke off the answer',
              );
        logger.warn({ reqId: req.id, err: describeError(error) }, 'upstream failed');
        // Normally settled already by the pool's interceptor; if not, the outcome is unknown.
        tracked.settle({ kind: 'unknown', error });
        void sendError(rep as unknown as FastifyReply, e);
      },
    });
    return tracked.done;
  };

  const ctx: FencedContext = {
    marks,
    queue,
    metrics,
    logger,
    names,
    replicas,
    reporter,
    forward,
    sendError,
  };

  app.get(`${ADMIN_PREFIX}/healthz`, (_req, reply) => reply.send({ status: 'ok' }));
  app.get(`${ADMIN_PREFIX}/readyz`, async (_req, reply) => {
    await marks.read('leasehold/readyz');
    return reply.send({ status: 'ready', marks: marks.kind });
  });
  app.get(`${ADMIN_PREFIX}/metrics`, async (_req, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  app.get(`${ADMIN_PREFIX}/marks`, async (req, reply) => {
    const scope = (req.query as Record<string, unknown>)['scope'];
    if (typeof scope !== 'string' || scope === '')
      throw new FenceHttpError('invalid_argument', 'query parameter scope is required');
    const principal = req.principal;
    if (principal !== undefined) authorizeKey(principal, 'read', scope);
    const m = await marks.read(scope);
    return reply.send({
      scope,
      highWaterMark: m.highWaterMark.toString(),
      version: m.version.toString(),
    });
  });

  app.route({
    method: ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'POST', 'PATCH', 'DELETE'],
    url: '/*',
    handler: async (req, reply) => {
      const path = req.url.split('?')[0] ?? '/';
      const match = matchRequest(routes, req.method, path, (n) => {
        const v = req.headers[n];
        return Array.isArray(v) ? v.join(',') : v;
      });
      switch (match.status) {
        case 'invalid':
          metrics.decisions.inc({ result: 'invalid', route: 'unmatched' });
          return sendError(reply, new FenceHttpError('invalid_argument', match.message));
        case 'unmatched':
          if (unmatched === 'refuse') {
            metrics.decisions.inc({ result: 'unmatched', route: 'unmatched' });
            return sendError(
              reply,
              new FenceHttpError(
                'not_found',
                `no fenced route matches ${req.method} ${path.slice(0, 200)}; unmatched ${req.method} requests are refused`,
              ),
            );
          }
          await forward(req, reply, { capture: false });
          return reply;
        case 'unfenced':
          await forward(req, reply, { capture: false });
          return reply;
        case 'fenced':
          if (auth.enabled) authorizeKey(req.principal as Principal, 'fence', match.scope);
          return handleFenced(ctx, req, reply, match.route, match.scope);
      }
    },
  });

  let url: string | undefined;
  let closing: Promise<void> | undefined;
  return {
    app,
    marks,
    metrics,
    get url() {
      return url;
    },
    async listen() {
      await app.listen({ host: options.host ?? GATEWAY_DEFAULTS.host, port });
      const addr = app.server.address() as AddressInfo;
      const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      url = `${options.tls ? 'https' : 'http'}://${host}:${addr.port}`;
      return url;
    },
    close() {
      closing ??= (async () => {
        const reap = setInterval(() => app.server.closeIdleConnections(), 50);
        const cut = setTimeout(() => app.server.closeAllConnections(), 10_000);
        try {
          await app.close();
        } finally {
          clearInterval(reap);
          clearTimeout(cut);
        }
        await pool.close();
        await reporter?.close();
        if (ownMarks) await marks.close();
      })();
      return closing;
    },
  };
}

function describeError(error: unknown): string {
  const cause = (error as { cause?: unknown } | null)?.cause;
  const e = cause instanceof Error ? cause : error;
  return e instanceof Error ? `${e.name}: ${e.message}` : 'unknown error';
}
