import { Transform } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { FenceHttpError } from '../http/fence-error.js';

/**
 * Replaces Fastify's body parsers: bodies are streamed to the upstream as they arrive, never
 * parsed, and never longer than `maxBody` bytes.
 */
export function installBodyLimit(app: FastifyInstance, maxBody: number): void {
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
}
