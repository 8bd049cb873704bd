import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LIMITS } from '../core/validate.js';
import { ApiError, toApiError } from './http-errors.js';

/**
 * The longest path parameter (an election name) the router takes, in characters as sent:
 * a 1 KiB key percent-encoded takes up to 3 characters a byte. Longer ones answer 414.
 */
export const MAX_PARAM_CHARS = 3 * LIMITS.maxKeyBytes;

/**
 * The error answer for a request Node's HTTP parser refused before Fastify saw it: headers
 * (with the request line) over Node's limit are 431, a request that timed out is 408, any
 * other framing error (a bad Content-Length, a broken chunk, a line that is not a header) is
 * 400 — each with the `{error:{code,message}}` body of every other answer.
 */
export function clientErrorAnswer(err: { code?: unknown }): ApiError {
  const code = typeof err.code === 'string' ? err.code : 'unknown';
  if (code === 'HPE_HEADER_OVERFLOW') {
    return new ApiError('headers_too_large', 'the request line and headers are too large');
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ApiError('request_timeout', 'the request did not arrive in time');
  }
  return new ApiError('invalid_argument', `malformed HTTP request (${code})`);
}

function clientErrorHandler(err: Error & { code?: unknown }, socket: Duplex): void {
  // A reset connection has nobody to answer (Node's documented case of clientError).
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const api = clientErrorAnswer(err);
    const body = JSON.stringify(api.body());
    socket.write(
      `HTTP/1.1 ${api.status} ${STATUS_CODES[api.status] ?? ''}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  // The parser cannot resume after an error: the connection ends here.
  socket.destroy();
}

function frameworkErrors(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  let api: ApiError;
  if (err.code === 'FST_ERR_BAD_URL') {
    api = new ApiError('invalid_argument', 'the path is not valid percent-encoded UTF-8');
  } else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    api = new ApiError(
      'uri_too_long',
      `a path parameter is longer than ${MAX_PARAM_CHARS} characters (names and keys are at most ${LIMITS.maxKeyBytes} bytes)`,
    );
  } else api = toApiError(err);
  void reply.code(api.status).send(api.body());
}

/**
 * Fastify server options that give the answers Fastify and Node would otherwise write
 * themselves the API's error shape: router errors (bad percent-encoding, an over-long path
 * parameter), parser errors (framing, oversized headers) and a missing Host header, which Node
 * answers with an empty 400 unless told not to (the server answers it, see
 * {@link registerUnmatchedAnswers}).
 */
export function frameworkErrorOptions() {
  return {
    frameworkErrors,
    clientErrorHandler,
    routerOptions: { maxParamLength: MAX_PARAM_CHARS },
    return503OnClosing: false,
  } as const;
}

/** Node's server options the API needs: see {@link frameworkErrorOptions}. */
export const NODE_SERVER_OPTIONS = Object.freeze({ requireHostHeader: false });

/** `/v1/elections/:name/campaign` → a RegExp matching the paths the route takes. */
function routePattern(url: string): RegExp {
  const escaped = url.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped.replace(/:[A-Za-z0-9_]+/g, '[^/]+').replace(/\*/g, '.*')}$`);
}

/**
 * Answers for requests no route takes, in the API's error shape: 405 `method_not_allowed` with
 * `Allow` when the path exists for other methods, else 404 `not_found`; 503 `unavailable` once
 * `shutdown` fired (Fastify's own 503 while closing has another shape, so it is off); 400 for
 * an HTTP/1.1 request without Host. Call before the routes are added.
 */
export function registerUnmatchedAnswers(app: FastifyInstance, shutdown: AbortSignal): void {
  const routes: Array<{ pattern: RegExp; method: string }> = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const pattern = routePattern(route.url);
    for (const method of methods) routes.push({ pattern, method: String(method) });
  });
  app.addHook('onRequest', (req, _reply, done) => {
    if (shutdown.aborted) return done(new ApiError('unavailable', 'the server is shutting down'));
    // RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without Host.
    if (req.headers.host === undefined && req.raw.httpVersion === '1.1') {
      return done(new ApiError('invalid_argument', 'HTTP/1.1 requests must have a Host header'));
    }
    done();
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? req.url;
    const allowed = [
      ...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method)),
    ].sort();
    if (allowed.length > 0) {
      return reply
        .code(405)
        .header('allow', allowed.join(', '))
        .send(
          new ApiError(
            'method_not_allowed',
            `${req.method} is not allowed on ${path}; use ${allowed.join(' or ')}`,
          ).body(),
        );
    }
    return reply.code(404).send(new ApiError('not_found', `no route ${req.method} ${path}`).body());
  });
}
