import type { Attributes, Context, Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { extractTraceContext, otelApi } from '../core/runtime/trace-context.js';

/**
 * The attribute names of OpenTelemetry's semantic conventions for HTTP server spans (stable
 * since 1.23; written out here because `@opentelemetry/semantic-conventions` is not a
 * dependency of leasehold).
 */
export const HTTP_ATTRIBUTES = Object.freeze({
  method: 'http.request.method',
  route: 'http.route',
  status: 'http.response.status_code',
  path: 'url.path',
  scheme: 'url.scheme',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
});

/** How one service traces its requests (see {@link traceRequests}). */
export interface RequestSpansOptions {
  /** The instrumentation scope of the tracer: the service's package name. */
  readonly scope: string;
  /** The service's version, recorded with the scope. Defaults to none. */
  readonly version?: string;
  /** Whether the route at `url` gets spans (long-lived streams do not). */
  readonly traced: (url: string) => boolean;
  /** Whether requests arrive over TLS (`url.scheme`). */
  readonly https: boolean;
  /**
   * Attributes of the service's own for a traced request, from what its handler answered (the
   * object it returned, or the error it threw). Called only while the span records.
   */
  readonly answered?: (
    req: FastifyRequest,
    answer: { readonly payload: unknown } | { readonly error: unknown },
  ) => Attributes | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span, while it records (see `traceRequests`). */
    traceSpan: Span | undefined;
    /** The context with the request's server span: its handler runs in it. */
    traceContext: Context | undefined;
  }
}

type Done = (err?: Error) => void;

/**
 * Makes each request of the routes `options.traced` picks a server span, following
 * OpenTelemetry's HTTP conventions: the parent is the caller's span from the request's
 * `traceparent` header (read by the propagator the application registered), the name is the
 * method and route, the handler runs with the span active (so the spans of the store calls it
 * makes are its children, and a forwarded request carries it on), and the span ends with the
 * answer's status. Register before the routes.
 *
 * Without `@opentelemetry/api` installed this adds nothing. With it but no SDK registered, a
 * request costs one no-op span (the API's non-recording span) and nothing else: the attributes,
 * the context and the listeners are made only for a span that records.
 */
export function traceRequests(app: FastifyInstance, options: RequestSpansOptions): void {
  const api = otelApi;
  if (api === undefined) return;
  const tracer = api.trace.getTracer(options.scope, options.version);
  const scheme = options.https ? 'https' : 'http';
  const A = HTTP_ATTRIBUTES;
  const answered = options.answered;
  app.decorateRequest('traceSpan', undefined);
  app.decorateRequest('traceContext', undefined);

  const end = (req: FastifyRequest, status: number | undefined): void => {
    const span = req.traceSpan;
    if (span === undefined) return;
    req.traceSpan = undefined;
    if (status === undefined) {
      // The client went away before the answer.
      span.setAttribute(A.errorType, 'aborted');
    } else {
      span.setAttribute(A.status, status);
      if (status >= 500) {
        span.setAttribute(A.errorType, String(status));
        span.setStatus({ code: api.SpanStatusCode.ERROR });
      }
    }
    span.end();
  };
  const note = (req: FastifyRequest, answer: Parameters<NonNullable<typeof answered>>[1]) => {
    const attributes = answered?.(req, answer);
    if (attributes !== undefined) req.traceSpan?.setAttributes(attributes);
  };

  app.addHook('onRoute', (route: RouteOptions) => {
    if (!options.traced(route.url)) return;
    const routeUrl = route.url;
    const start = (req: FastifyRequest, reply: FastifyReply, done: Done): void => {
      const parent = extractTraceContext(req.headers) ?? api.ROOT_CONTEXT;
      const span = tracer.startSpan(
        `${req.method} ${routeUrl}`,
        { kind: api.SpanKind.SERVER },
        parent,
      );
      if (span.isRecording()) {
        const q = req.url.indexOf('?');
        span.setAttributes({
          [A.method]: req.method,
          [A.route]: routeUrl,
          [A.path]: q < 0 ? req.url : req.url.slice(0, q),
          [A.scheme]: scheme,
          [A.serverAddress]: req.hostname,
        });
        if (req.port !== null) span.setAttribute(A.serverPort, req.port);
        req.traceSpan = span;
        req.traceContext = api.trace.setSpan(parent, span);
        // Ends with the answer, or when the client went away before it (no status then).
        const res = reply.raw;
        res.once('close', () => end(req, res.writableFinished ? res.statusCode : undefined));
      }
      done();
    };
    route.onRequest = [start, ...hookList(route.onRequest)];
    const handler = route.handler;
    route.handler = function (this: FastifyInstance, req, reply) {
      const ctx = req.traceContext;
      if (ctx === undefined) return handler.call(this, req, reply);
      if (answered === undefined) return api.context.with(ctx, handler, this, req, reply);
      let result: unknown;
      try {
        result = api.context.with(ctx, handler, this, req, reply);
      } catch (error) {
        note(req, { error });
        throw error;
      }
      if (!(result instanceof Promise)) {
        if (result !== reply) note(req, { payload: result });
        return result;
      }
      return result.then(
        (payload: unknown) => {
          if (payload !== reply) note(req, { payload });
          return payload;
        },
        (error: unknown) => {
          note(req, { error });
          throw error;
        },
      );
    };
  });
}

/** A route's hook option (absent, one hook or a list) as a list. */
function hookList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
}
