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
   * Attributes of the service's own, read from a traced request and the object answered,
   * before it is serialized. Called only while the span records.
   */
  readonly answered?: (req: FastifyRequest, payload: unknown) => Attributes | undefined;
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
 * Without `@opentelemetry/api` installed this adds nothing. With it but no SDK registered, each
 * request costs one no-op span start (the API's non-recording span): the hooks stop there.
 */
export function traceRequests(app: FastifyInstance, options: RequestSpansOptions): void {
  const api = otelApi;
  if (api === undefined) return;
  const tracer = api.trace.getTracer(options.scope, options.version);
  const scheme = options.https ? 'https' : 'http';
  const A = HTTP_ATTRIBUTES;
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

  app.addHook('onRoute', (route: RouteOptions) => {
    if (!options.traced(route.url)) return;
    const routeUrl = route.url;
    const start = (req: FastifyRequest, _reply: FastifyReply, done: Done): void => {
      const parent = extractTraceContext(req.headers) ?? api.ROOT_CONTEXT;
      const q = req.url.indexOf('?');
      const attributes: Attributes = {
        [A.method]: req.method,
        [A.route]: routeUrl,
        [A.path]: q < 0 ? req.url : req.url.slice(0, q),
        [A.scheme]: scheme,
        [A.serverAddress]: req.hostname,
      };
      if (req.port !== null) attributes[A.serverPort] = req.port;
      const span = tracer.startSpan(
        `${req.method} ${routeUrl}`,
        { kind: api.SpanKind.SERVER, attributes },
        parent,
      );
      if (span.isRecording()) {
        req.traceSpan = span;
        req.traceContext = api.trace.setSpan(parent, span);
      }
      done();
    };
    const finish = (req: FastifyRequest, reply: FastifyReply, done: Done): void => {
      end(req, reply.statusCode);
      done();
    };
    const aborted = (req: FastifyRequest, done: Done): void => {
      end(req, undefined);
      done();
    };
    route.onRequest = [start, ...hookList(route.onRequest)];
    route.onResponse = [...hookList(route.onResponse), finish];
    route.onRequestAbort = [...hookList(route.onRequestAbort), aborted];
    const answered = options.answered;
    if (answered !== undefined) {
      const note = (req: FastifyRequest, _reply: FastifyReply, payload: unknown, done: Done) => {
        const span = req.traceSpan;
        if (span !== undefined) {
          const attributes = answered(req, payload);
          if (attributes !== undefined) span.setAttributes(attributes);
        }
        done();
      };
      route.preSerialization = [...hookList(route.preSerialization), note];
    }
    const handler = route.handler;
    route.handler = function (this: FastifyInstance, req, reply) {
      const ctx = req.traceContext;
      return ctx === undefined
        ? handler.call(this, req, reply)
        : api.context.with(ctx, handler, this, req, reply);
    };
  });
}

/** A route's hook option (absent, one hook or a list) as a list. */
function hookList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
}
