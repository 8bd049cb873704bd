import type { IncomingMessage } from 'node:http';
import { Transform } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { FenceHttpError } from '../http/fence-error.js';

/** Requests whose streamed body crossed the limit while it was being forwarded. */
const overLimit = new WeakSet<IncomingMessage>();

/** The gateway's answer to a body longer than `maxBody`. */
export function bodyTooLarge(maxBody: number): FenceHttpError {
  return new FenceHttpError('payload_too_large', `request body is larger than ${maxBody} bytes`, {
    // The rest of the body is not read: the connection cannot carry another request.
    connection: 'close',
  });
}

/** Whether this request's body crossed the limit (its forward was then cut off on purpose). */
export function crossedBodyLimit(req: IncomingMessage): boolean {
  return overLimit.has(req);
}

/**
 * Replaces Fastify's body parsers: bodies are streamed to the upstream as they arrive, never
 * parsed, and never longer than `maxBody` bytes.
 *
 * A declared `Content-Length` above the limit is refused before anything is decided or
 * forwarded. A body without one (chunked) is counted as it streams; when it crosses the limit
 * the stream fails, undici destroys the upstream connection before the chunked message's
 * terminating chunk, so the upstream sees a request broken off — never a complete one — and
 * the client gets 413 (see {@link crossedBodyLimit}). The token had passed by then: the mark
 * stays where the check put it.
 */
export function installBodyLimit(app: FastifyInstance, maxBody: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (req, payload, done) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > maxBody) return done(bodyTooLarge(maxBody), undefined);
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
        if (seen > maxBody) {
          overLimit.add(req.raw);
          cb(bodyTooLarge(maxBody));
        } else cb(null, chunk);
      },
    });
    payload.on('error', (err) => limit.destroy(err));
    done(null, payload.pipe(limit));
  });
}
