import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import { invalidArgument } from '../core/errors.js';
import type { LeaseStore } from '../core/store.js';
import { LIMITS } from '../core/validate.js';
import { registerLeaseRoutes } from './api.js';
import { registerBatchRoute } from './batch.js';
import { registerElectionRoutes } from './elections.js';
import { registerFenceRoutes } from './fence-decisions.js';
import { Authenticator, type AuthConfig } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import { WaitQueues } from '../core/key-waiters.js';
import type { ServerAsk, ServerGrant } from './acquire-wait.js';
import { EventHub } from './event-hub.js';
import { ExpiryTracker } from './expiry-tracker.js';
import {
  frameworkErrorOptions,
  NODE_SERVER_OPTIONS,
  registerUnmatchedAnswers,
} from './framework-errors.js';
import { ApiError, reportApiError, toApiError } from './http-errors.js';
import { ServerMetrics } from './metrics.js';
import { MAX_BATCH_OPS, MAX_BATCH_RENEWALS } from './schemas.js';
import { openApiDocument } from './openapi.js';
import { registerEventRoutes } from './sse.js';
import { registerLessonRoutes } from './lesson-page.js';
import { schemaError } from './schema-errors.js';
import { registerRecentEventRoutes } from './recent-events.js';
import { VERSION } from './version.js';
import { fastifyModule, pinoModule } from './peers.js';
import { closeGracefully, listenAt } from '../http-service/listen.js';
import { serviceLogger } from '../http-service/logger.js';
import { traceRequests } from '../http-service/request-spans.js';
import { leaseAttributes, tracedRoute } from './request-attributes.js';
import { storeWithSpans } from './store-spans.js';

const { fastify, LogController } = fastifyModule;

/** Options for {@link createLeaseServer}. */
export interface LeaseServerOptions {
  /** The lease authority the server fronts. The server is stateless over it. */
  readonly store: LeaseStore;
  /** Interface to listen on. Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Port; 0 picks a free one. Defaults to 7400. */
  readonly port?: number;
  /** Bearer tokens with key prefixes and verbs. Defaults to none: no authentication. */
  readonly auth?: AuthConfig;
  /** Serve HTTPS with this certificate and key (PEM). Defaults to plain HTTP. */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /**
   * Largest request body accepted; larger ones get 413. Defaults to 16 KiB. `POST /v1/batch`
   * accepts up to 512 KiB (or this, when larger): 128 operations with 1 KiB keys and values.
   */
  readonly bodyLimitBytes?: number;
  /** Longest `wait` an acquire may ask for (a long poll). Defaults to 5 minutes. */
  readonly maxWaitMs?: number;
  /** Timeout of each request to the store. Defaults to 5 s. */
  readonly requestTimeoutMs?: number;
  /** A pino logger. Defaults to pino at `logLevel` on stderr. */
  readonly logger?: PinoLogger;
  /** Level of the default logger. Defaults to `info`. */
  readonly logLevel?: string;
  /** Close the store when the server closes. Defaults to false. */
  readonly closeStore?: boolean;
  /** Collect Node process metrics in `/metrics`. Defaults to true. */
  readonly processMetrics?: boolean;
}

/** The defaults of {@link LeaseServerOptions}. */
export const SERVER_DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 7400,
  bodyLimitBytes: 16 * 1024,
  maxWaitMs: 300_000,
  requestTimeoutMs: 5000,
});

/** Body limit of `POST /v1/batch` (unless `bodyLimitBytes` is larger). */
const BATCH_BODY_LIMIT_BYTES = 512 * 1024;

/** A running (or ready to run) leasehold server. */
export interface LeaseServer {
  /** The Fastify instance, for `inject()` in tests and extra routes. */
  readonly app: FastifyInstance;
  readonly metrics: ServerMetrics;
  /** Starts listening and returns the base URL, e.g. `http://127.0.0.1:7400`. */
  listen(): Promise<string>;
  /** The base URL once listening. */
  readonly url: string | undefined;
  /**
   * Graceful shutdown: refuses new requests, answers waiting acquires `unavailable`, ends event
   * streams, lets in-flight requests finish, then closes (and optionally the store).
   */
  close(): Promise<void>;
}

function positiveInt(field: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalidArgument(field, `must be an integer from 1 to ${max}`, value);
  }
  return value;
}

type HookDone = (err?: Error) => void;

/** A route's hook option (absent, one hook or a list) as a list. */
function hookList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
}

/**
 * Creates a leasehold HTTP server over `store`: the `/v1` API (acquire with bounded long-poll
 * wait, renew, release, get, list, events), `/metrics`, `/healthz`, `/readyz`,
 * `/v1/openapi.json` and the live dashboard at `/`. Call `listen()` to start it.
 *
 * @example
 * const server = await createLeaseServer({ store: new SqliteLeaseStore({ path: './leasehold.db' }) });
 * console.log(await server.listen());
 */
export function createLeaseServer(options: LeaseServerOptions): LeaseServer {
  const store = options.store;
  if (store === undefined || typeof store.tryAcquire !== 'function') {
    throw invalidArgument('store', 'must be a LeaseStore', store);
  }
  const host = options.host ?? SERVER_DEFAULTS.host;
  const port = options.port ?? SERVER_DEFAULTS.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw invalidArgument('port', 'must be an integer from 0 to 65535', port);
  }
  const bodyLimit = positiveInt(
    'bodyLimitBytes',
    options.bodyLimitBytes,
    SERVER_DEFAULTS.bodyLimitBytes,
    1 << 20,
  );
  const maxWaitMs = positiveInt(
    'maxWaitMs',
    options.maxWaitMs,
    SERVER_DEFAULTS.maxWaitMs,
    86_400_000,
  );
  const requestTimeoutMs = positiveInt(
    'requestTimeoutMs',
    options.requestTimeoutMs,
    SERVER_DEFAULTS.requestTimeoutMs,
    600_000,
  );
  const logger = options.logger ?? serviceLogger(pinoModule, 'leasehold', options.logLevel);
  const auth = new Authenticator(options.auth);
  const metrics = new ServerMetrics({
    storeKind: store.kind,
    defaultMetrics: options.processMetrics,
    liveLeases: () => tracker.size,
    waiting: () => ctx.waiting.size,
  });
  const hub = new EventHub((type) => metrics.eventsPublished.inc({ type }));
  const shutdown = new AbortController();
  const streams = new Set<ServerResponse>();
  const tracker = new ExpiryTracker({
    store,
    requestTimeoutMs,
    onExpired: (l) => {
      metrics.leasesLost.inc({ reason: 'expired' });
      metrics.timeHeld.observe({ end: 'expired' }, l.heldMs / 1000);
      hub.publish({
        type: 'expired',
        key: l.key,
        token: l.token.toString(),
        ownerId: l.ownerId,
        leaseIdPrefix: l.leaseIdPrefix,
      });
      logger.info(
        { key: l.key, ownerId: l.ownerId, lease: l.leaseIdPrefix, token: l.token.toString() },
        'lease expired without release',
      );
    },
  });
  const ctx: ServerContext = {
    // The routes' store calls are spans of the request's trace (when there is one).
    store: storeWithSpans(store, 'leasehold', VERSION),
    auth,
    hub,
    tracker,
    metrics,
    logger,
    maxWaitMs,
    requestTimeoutMs,
    pollMs: store.capabilities.watch === 'push' ? 2000 : 250,
    shutdown: shutdown.signal,
    streams,
    storeOptions: Object.freeze({ timeoutMs: requestTimeoutMs, signal: shutdown.signal }),
    waiting: new WaitQueues<ServerGrant, ServerAsk>(),
  };

  const app = fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    // No child logger per request (a pino child per request was ~3% of the server's CPU):
    // the few request logs name their request id themselves.
    childLoggerFactory: (parent) => parent,
    bodyLimit,
    forceCloseConnections: 'idle',
    ...frameworkErrorOptions(),
    http: NODE_SERVER_OPTIONS,
    ...(options.tls
      ? { https: { ...NODE_SERVER_OPTIONS, cert: options.tls.cert, key: options.tls.key } }
      : {}),
    ajv: {
      customOptions: {
        coerceTypes: false,
        removeAdditional: false,
        allowUnionTypes: true,
        strict: false,
        discriminator: true,
      },
    },
    schemaErrorFormatter: schemaError,
  }) as unknown as FastifyInstance;

  app.decorateRequest('principal', undefined);
  const authenticate = (req: FastifyRequest, _reply: FastifyReply, done: HookDone): void => {
    try {
      req.principal = auth.authenticate(req.headers.authorization);
    } catch (err) {
      metrics.authFailures.inc({ code: 'unauthenticated' });
      return done(err as Error);
    }
    done();
  };
  const observe = (req: FastifyRequest, reply: FastifyReply, route: string): void => {
    metrics.httpRequests.observe(
      { method: req.method, route, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  };
  // Per-route hooks, set up once when each route is added: reading `req.routeOptions` in a
  // global hook builds a fresh options object on every request (measurable at a few thousand
  // requests per second).
  const ours = new WeakSet<object>();
  app.addHook('onRoute', (route) => {
    // A HEAD route made from a GET route arrives with the GET's hooks already added.
    const onResponses = hookList(route.onResponse).filter((h) => !ours.has(h));
    const onRequests = hookList(route.onRequest).filter((h) => h !== authenticate);
    const url = route.url;
    const onResponse = (req: FastifyRequest, reply: FastifyReply, done: HookDone): void => {
      observe(req, reply, url);
      done();
    };
    ours.add(onResponse);
    route.onResponse = [onResponse, ...onResponses];
    // Without configured tokens every request is ANONYMOUS (the routes' default): no hook.
    route.onRequest =
      auth.enabled && route.config?.auth === true ? [authenticate, ...onRequests] : onRequests;
  });
  // After the hook above: the span starts before authentication, so refusals are traced too.
  traceRequests(app, {
    scope: 'leasehold',
    version: VERSION,
    https: options.tls !== undefined,
    traced: tracedRoute,
    answered: leaseAttributes,
  });
  // Requests that matched no route (404) have no route hooks.
  app.addHook('onResponse', (req, reply, done) => {
    if (req.is404) observe(req, reply, 'unmatched');
    done();
  });
  app.setErrorHandler((err, req, reply) => {
    const api = toApiError(err);
    reportApiError(api, err, { logger, metrics, reqId: req.id, route: req.routeOptions.url });
    const retry = api.extra?.['retryAfterMs'];
    if (typeof retry === 'number')
      void reply.header('retry-after', String(Math.max(1, Math.ceil(retry / 1000))));
    return reply.code(api.status).send(api.body());
  });
  registerUnmatchedAnswers(app, shutdown.signal);

  registerLeaseRoutes(app, ctx);
  // A batch holds up to MAX_BATCH_OPS operations, each within the single-request limit.
  const batchBodyLimit = Math.max(bodyLimit, BATCH_BODY_LIMIT_BYTES);
  registerBatchRoute(app, ctx, batchBodyLimit);
  registerElectionRoutes(app, ctx);
  registerEventRoutes(app, ctx);
  registerRecentEventRoutes(app, ctx);
  registerFenceRoutes(app, ctx);

  const openapi = openApiDocument(VERSION);
  app.get('/v1/openapi.json', () => openapi);
  app.get('/v1/info', () => ({
    name: 'leasehold',
    version: VERSION,
    store: {
      kind: store.kind,
      // Always present: a client must never assume blocks from a missing field.
      capabilities: { ...store.capabilities, tokenBlocks: store.capabilities.tokenBlocks === true },
    },
    auth: auth.enabled ? 'bearer' : 'none',
    limits: {
      bodyLimitBytes: bodyLimit,
      maxWaitMs,
      batchMaxOps: MAX_BATCH_OPS,
      batchMaxRenewals: MAX_BATCH_RENEWALS,
      batchBodyLimitBytes: batchBodyLimit,
      maxTokenBlock: LIMITS.maxTokenBlock,
    },
  }));
  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', async () => {
    if (shutdown.signal.aborted) throw new ApiError('unavailable', 'the server is shutting down');
    try {
      await store.inspect('leasehold/readyz', {
        timeoutMs: 2000,
        signal: AbortSignal.timeout(2000),
      });
    } catch (err) {
      throw new ApiError(
        'unavailable',
        `the lease store (${store.kind}) is unreachable: ${String(err)}`,
      );
    }
    return { status: 'ready', store: store.kind };
  });
  app.get('/metrics', async (_req, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
  const dashboard = readFileSync(new URL('./dashboard.html', import.meta.url), 'utf8');
  app.get('/', (_req, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header(
        'content-security-policy',
        "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:",
      )
      .send(dashboard),
  );
  registerLessonRoutes(app);

  let url: string | undefined;
  let closing: Promise<void> | undefined;
  return {
    app,
    metrics,
    get url() {
      return url;
    },
    async listen() {
      url = await listenAt(app, host, port, Boolean(options.tls));
      return url;
    },
    close() {
      closing ??= (async () => {
        shutdown.abort(new Error('server shutting down'));
        for (const res of streams) res.end();
        tracker.stop();
        await closeGracefully(app);
        if (options.closeStore === true) await store.close();
      })();
      return closing;
    },
  };
}
