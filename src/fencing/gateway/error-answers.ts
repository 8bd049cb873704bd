import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { isLeaseholdError } from '../../core/errors.js';
import { ApiError } from '../../http-service/api-error.js';
import { FenceHttpError, fenceErrorBody, toFenceHttpError } from '../http/fence-error.js';

/** Answers with one of the gateway's own errors: `{ "error": { "code", "message" } }`. */
export function sendError(reply: FastifyReply, e: FenceHttpError): FastifyReply {
  for (const [k, v] of Object.entries(e.headers)) void reply.header(k, v);
  return reply
    .code(e.status)
    .type('application/json; charset=utf-8')
    .send(fenceErrorBody(e.code, e.message));
}

/**
 * Makes every error Fastify or a handler raises, and every unknown route, answer in the one
 * error shape. Unknown errors are `internal` (500); their details go to the log only.
 */
export function installErrorAnswers(app: FastifyInstance, logger: Logger): void {
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
}

/**
 * Fastify's `clientErrorHandler`: a request Node's parser refused (framing, header size) gets
 * the error shape too, written on the socket since no request object exists yet.
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) return void socket.destroy();
  const e = toFenceHttpError(err);
  const body = fenceErrorBody(e.code, e.message);
  socket.end(
    `HTTP/1.1 ${e.status} ${e.code}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Fastify's `frameworkErrors`: what its router refuses before any hook runs (a path that is
 * not valid percent-encoded UTF-8, an over-long parameter) answers in the error shape too.
 */
export function answerFrameworkError(
  err: FastifyError,
  _req: FastifyRequest,
  reply: FastifyReply,
): void {
  const e =
    err.code === 'FST_ERR_BAD_URL'
      ? new FenceHttpError(
          'invalid_argument',
          'request target refused (bad_percent_encoding): the path is not valid percent-encoded UTF-8',
        )
      : toFenceHttpError(err);
  void sendError(reply, e);
}
