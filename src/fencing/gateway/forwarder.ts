import { traceHeaders } from '../../core/runtime/trace-context.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { FenceHttpError } from '../http/fence-error.js';
import { bodyTooLarge, crossedBodyLimit } from './body-limit.js';
import { sendError } from './error-answers.js';
import { FORWARD_ID_HEADER, type ForwardOutcome, type UpstreamPool } from './forward.js';
import { stripHopByHop, withoutHopByHop } from './hop-by-hop.js';

/** How one request is forwarded. */
export interface ForwardHow {
  /** The canonical request target (path and query) checked by `checkRequestTarget`: sent as it is. */
  readonly target: string;
  /** The request's token, forwarded in the `forwardToken` header (fenced requests). */
  readonly token?: bigint;
  /** Keep the answer (status, headers, a bounded body) to replay it for an idempotency key. */
  readonly capture: boolean;
  /** Aborts the upstream exchange (a lost scope hold). */
  readonly signal?: AbortSignal | undefined;
  /** The scope's version after this request, sent back in `fencing-version`. */
  readonly version?: bigint | undefined;
}

/** Forwards one request and resolves when the upstream exchange is over, either way. */
export type Forward = (
  req: FastifyRequest,
  reply: FastifyReply,
  how: ForwardHow,
) => Promise<ForwardOutcome>;

/** What {@link createForwarder} needs. */
export interface ForwarderOptions {
  readonly pool: UpstreamPool;
  /** The upstream URL's path prefix (no trailing slash), put before each request's URL. */
  readonly basePath: string;
  readonly timeoutMs: number;
  /** The body limit, for the 413 of a streamed body that crossed it. */
  readonly maxBodyBytes: number;
  /** The incoming token header, replaced by `forwardToken`. */
  readonly tokenHeader: string;
  readonly forwardToken: string;
  /** Whether the gateway checks bearer tokens: its own secret is then never forwarded. */
  readonly stripAuthorization: boolean;
  readonly logger: Logger;
}

/**
 * The forward of the gateway, through `@fastify/reply-from` (registered with the pool's
 * dispatcher). The answer is streamed back as it comes; upstream failures become the gateway's
 * own 502 or 504 answers.
 */
export function createForwarder(o: ForwarderOptions): Forward {
  const { pool, basePath, timeoutMs, tokenHeader, forwardToken, stripAuthorization, logger } = o;
  const upstreamFailed = (code: unknown): FenceHttpError =>
    code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT'
      ? new FenceHttpError('gateway_timeout', `the upstream did not answer within ${timeoutMs} ms`)
      : new FenceHttpError(
          'bad_gateway',
          'the upstream could not be reached or broke off the answer',
        );
  return (req, reply, how) => {
    const path = basePath + how.target;
    const tracked = pool.track(how.capture, how.signal, path);
    // reply-from parses its source with WHATWG URL; the pool's dispatcher puts `path` back on
    // the request line, so the upstream gets the very bytes the route and scope came from.
    const q = path.indexOf('?');
    reply.from(q < 0 ? path : path.slice(0, q), {
      timeout: timeoutMs,
      rewriteRequestHeaders: (_req, headers) => {
        // reply-from hands over its own copy of the request's headers: changed in place, no
        // second copy. (undefined rather than delete: undici skips such headers, and the
        // object keeps its fast shape.)
        const out = stripHopByHop(headers as Record<string, string | string[] | undefined>);
        out[FORWARD_ID_HEADER] = tracked.id;
        // The upstream's spans are children of the gateway's (the caller's `traceparent` is
        // replaced); without a gateway span the caller's headers pass as they came.
        const trace = traceHeaders(req.traceContext);
        if (trace !== undefined) for (const name in trace) out[name] = trace[name];
        // The gateway's own bearer secret never travels further.
        if (stripAuthorization) out['authorization'] = undefined;
        if (how.token !== undefined) {
          out[tokenHeader] = undefined;
          out[forwardToken] = how.token.toString();
        }
        return out;
      },
      // The answer's own framing and connection fields stay on the upstream connection.
      rewriteHeaders: (headers) => withoutHopByHop(headers),
      onResponse: (_req, rep, res) => {
        if (how.version !== undefined) void rep.header('fencing-version', how.version.toString());
        void rep.send(res.stream);
      },
      onError: (rep, { error }) => {
        // A streamed body that crossed the limit failed the forward on purpose: the client's
        // fault (413), not the upstream's (502).
        const tooLarge = crossedBodyLimit(req.raw);
        const e = tooLarge
          ? bodyTooLarge(o.maxBodyBytes)
          : upstreamFailed((error as { code?: unknown }).code);
        if (!tooLarge) logger.warn({ reqId: req.id, err: describeError(error) }, 'upstream failed');
        // Normally settled already by the pool's interceptor; if not, the outcome is unknown.
        tracked.settle({ kind: 'unknown', error });
        void sendError(rep as unknown as FastifyReply, e);
      },
    });
    return tracked.done;
  };
}

function describeError(error: unknown): string {
  const cause = (error as { cause?: unknown } | null)?.cause;
  const e = cause instanceof Error ? cause : error;
  return e instanceof Error ? `${e.name}: ${e.message}` : 'unknown error';
}
