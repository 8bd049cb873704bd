import replyFrom from '@fastify/reply-from';
import { fastify, LogController, type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { invalidArgument } from '../../core/errors.js';
import { Authenticator, authorizeKey, type Principal } from '../../http-service/auth.js';
import { closeGracefully, listenAt } from '../../http-service/listen.js';
import { serviceLogger } from '../../http-service/logger.js';
import { traceRequests } from '../../http-service/request-spans.js';
import { createFenceReporter, type FenceReporter } from '../../stores/http/index.js';
import { FenceHttpError } from '../http/fence-error.js';
import { checkRequestTarget } from '../http/request-target.js';
import type { MarkStore } from '../marks/mark-store.js';
import { openMarkStore } from '../marks/open-mark-store.js';
import { ScopeQueue } from '../scope-queue.js';
import { ADMIN_PREFIX, registerAdminRoutes } from './admin-routes.js';
import { installBodyLimit } from './body-limit.js';
import { CLAIM_PATH, registerClaimRoute } from './claim-route.js';
import {
  answerClientError,
  answerFrameworkError,
  installErrorAnswers,
  sendError,
} from './error-answers.js';
import { handleFenced, type FencedContext } from './fenced-request.js';
import { UpstreamPool } from './forward.js';
import { createForwarder } from './forwarder.js';
import { GatewayMetrics } from './metrics.js';
import { matchRequest } from './routes.js';
import { GATEWAY_DEFAULTS, resolveGatewayOptions, type GatewayOptions } from './options.js';

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

export { ADMIN_PREFIX } from './admin-routes.js';

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
  const o = resolveGatewayOptions(options);
  const { upstream, routes, unmatched, replicas, names } = o;
  const auth = new Authenticator(options.auth);
  const logger = options.logger ?? serviceLogger({ pino }, 'leasehold-gateway', options.logLevel);

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
  const queue = new ScopeQueue(o.maxQueuePerScope);
  const metrics = new GatewayMetrics({
    marksKind: marks.kind,
    defaultMetrics: options.processMetrics,
    inFlight: () => queue.total,
  });
  const pool = new UpstreamPool(upstream.origin, {
    connections: o.upstreamConnections,
    keepAliveTimeout: 4000,
    headersTimeout: o.upstreamTimeoutMs,
    bodyTimeout: o.upstreamTimeoutMs,
    ...(upstream.protocol === 'https:'
      ? {
          connect: {
            ...(options.upstreamTls?.ca === undefined ? {} : { ca: options.upstreamTls.ca }),
            rejectUnauthorized: options.upstreamTls?.rejectUnauthorized ?? true,
          },
        }
      : {}),
  });

  const app = fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: (parent) => parent,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    exposeHeadRoutes: false,
    routerOptions: { ignoreDuplicateSlashes: false, maxParamLength: 65_536 },
    ...(options.tls ? { https: { cert: options.tls.cert, key: options.tls.key } } : {}),
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
  }) as unknown as FastifyInstance;
  installErrorAnswers(app, logger);
  installBodyLimit(app, o.maxBodyBytes);

  app.decorateRequest('principal', undefined);
  app.addHook('onRequest', (req, reply, done) => {
    if (req.url.length > o.maxUrlLength)
      return done(
        new FenceHttpError(
          'uri_too_long',
          `request URL is longer than ${o.maxUrlLength} characters`,
        ),
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

  // Route hooks: registered before the routes. The forward carries the gateway's span on.
  traceRequests(app, {
    scope: 'leasehold-gateway',
    https: options.tls !== undefined,
    traced: (url) => url === '/*' || url === CLAIM_PATH,
  });

  await app.register(replyFrom, {
    base: upstream.origin,
    undici: pool.dispatcher as never,
    retryMethods: [],
    disableRequestLogging: true,
  });

  const forward = createForwarder({
    pool,
    basePath: upstream.pathname.replace(/\/$/, ''),
    timeoutMs: o.upstreamTimeoutMs,
    maxBodyBytes: o.maxBodyBytes,
    tokenHeader: names.token,
    forwardToken: o.forwardToken,
    stripAuthorization: auth.enabled,
    logger,
  });

  const ctx: FencedContext = {
    marks,
    queue,
    metrics,
    logger,
    names,
    replicas,
    reporter,
    forward,
  };

  registerAdminRoutes(app, marks, metrics);
  registerClaimRoute(app, ctx, routes);

  app.route({
    method: ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'POST', 'PATCH', 'DELETE'],
    url: '/*',
    handler: async (req, reply) => {
      // The one target that decides the route, the scope and the bytes forwarded (decision 032).
      const target = checkRequestTarget(req.url);
      if (target.status === 'refused') {
        metrics.refusedTargets.inc({ rule: target.rule });
        return sendError(reply, new FenceHttpError('invalid_argument', target.message));
      }
      const path = target.path;
      const match = matchRequest(routes, req.method, path, (n) => {
        const v = req.headers[n];
        return Array.isArray(v) ? v.join(',') : v;
      });
      switch (match.status) {
        case 'invalid':
          metrics.decided('invalid', 'unmatched');
          return sendError(reply, new FenceHttpError('invalid_argument', match.message));
        case 'unmatched':
          if (unmatched === 'refuse') {
            metrics.decided('unmatched', 'unmatched');
            return sendError(
              reply,
              new FenceHttpError(
                'not_found',
                `no fenced route matches ${req.method} ${path.slice(0, 200)}; unmatched ${req.method} requests are refused`,
              ),
            );
          }
          await forward(req, reply, { capture: false, target: target.target });
          return reply;
        case 'unfenced':
          await forward(req, reply, { capture: false, target: target.target });
          return reply;
        case 'fenced':
          if (auth.enabled) authorizeKey(req.principal as Principal, 'fence', match.scope);
          return handleFenced(ctx, req, reply, match.route, match.scope, target.target);
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
      const host = options.host ?? GATEWAY_DEFAULTS.host;
      url = await listenAt(app, host, o.port, Boolean(options.tls));
      return url;
    },
    close() {
      closing ??= (async () => {
        await closeGracefully(app);
        await pool.close();
        await reporter?.close();
        if (ownMarks) await marks.close();
      })();
      return closing;
    },
  };
}
