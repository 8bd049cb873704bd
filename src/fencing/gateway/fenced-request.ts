import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { isLeaseholdError } from '../../core/errors.js';
import { assertNever } from '../../core/results.js';
import type { FenceReporter } from '../../stores/http/index.js';
import { REPLAYED_HEADER, replayOf } from '../http/answer-replay.js';
import { FenceHttpError } from '../http/fence-error.js';
import {
  MARK_HEADER,
  VERSION_HEADER,
  parseFenceHeaders,
  type FenceHeaderNames,
} from '../http/fence-headers.js';
import type { AnswerRecord, MarkDecision, MarkStore, ScopeHold } from '../marks/mark-store.js';
import type { ScopeQueue } from '../scope-queue.js';
import { sendError } from './error-answers.js';
import type { ForwardOutcome } from './forward.js';
import type { Forward } from './forwarder.js';
import type { GatewayMetrics } from './metrics.js';
import type { CompiledRoute } from './routes.js';

/** What {@link handleFenced} needs from the gateway. */
export interface FencedContext {
  readonly marks: MarkStore;
  readonly queue: ScopeQueue;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly names: FenceHeaderNames;
  readonly replicas: 'single' | 'scope-lock';
  readonly reporter: FenceReporter | undefined;
  readonly forward: Forward;
}

/** What one fenced request carries: its scope, canonical target and fencing headers. */
interface FencedFields {
  readonly scope: string;
  readonly target: string;
  readonly token: bigint;
  readonly key: string | undefined;
  readonly expectedVersion: bigint | undefined;
}

/** The attributes of a fenced request's span (tokens and marks as decimal strings). */
const FENCE_SPAN_ATTRIBUTES = Object.freeze({
  scope: 'leasehold.scope',
  token: 'leasehold.token',
  result: 'leasehold.result',
  highWaterMark: 'leasehold.high_water_mark',
});

/**
 * One fenced request: parse its token, idempotency key and expected version; then, alone in
 * its scope (this process's queue, and with `scope-lock` the scope's PostgreSQL lock), check
 * and advance the mark durably, and only on `applied` forward it, holding the scope until the
 * upstream's answer ended. Stale, duplicate and mismatched requests never reach the upstream.
 */
export async function handleFenced(
  ctx: FencedContext,
  req: FastifyRequest,
  reply: FastifyReply,
  route: CompiledRoute,
  scope: string,
  target: string,
): Promise<FastifyReply> {
  const fields = parseFenceHeaders(req.headers, ctx.names);
  if (fields.status === 'invalid') {
    ctx.metrics.decided('invalid', route.name);
    return sendError(reply, new FenceHttpError('invalid_argument', fields.message));
  }
  const { token, idempotencyKey: key, expectedVersion } = fields;
  const queued = ctx.queue.run(scope, () =>
    decideAndForward(ctx, req, reply, route, { scope, target, token, key, expectedVersion }),
  );
  if (queued === undefined) {
    ctx.metrics.decided('busy', route.name);
    return sendError(
      reply,
      new FenceHttpError('busy', `too many requests wait for scope ${scope}; retry later`, {
        'retry-after': '1',
      }),
    );
  }
  return queued;
}

async function decideAndForward(
  ctx: FencedContext,
  req: FastifyRequest,
  reply: FastifyReply,
  route: CompiledRoute,
  fenced: FencedFields,
): Promise<FastifyReply> {
  const { scope, target, token, key, expectedVersion } = fenced;
  // The client left while queued: nothing is decided or forwarded for it.
  if (req.raw.socket === null || req.raw.socket.destroyed) return reply;
  let hold: ScopeHold | undefined;
  try {
    if (ctx.replicas === 'scope-lock') hold = await ctx.marks.holdScope?.(scope);
    // One object of one shape (absent fields undefined) rather than spreads of conditional
    // objects: the stores test each field against undefined.
    let decision: MarkDecision = await ctx.marks.check({
      scope,
      token,
      policy: route.policy,
      idempotencyKey: key,
      expectedVersion,
    });
    let record: AnswerRecord | undefined;
    if (decision.status === 'duplicate' && key !== undefined) {
      record = await ctx.marks.answer(scope, token, key);
      if (record?.state === 'not_sent') {
        // The first attempt never reached the upstream: forward this one, but only if no
        // newer token arrived meanwhile (the mark still equals this token).
        const now = await ctx.marks.read(scope);
        decision =
          now.highWaterMark === token
            ? { status: 'applied', wrote: true, version: undefined }
            : { status: 'stale_fence', highWaterMark: now.highWaterMark };
        if (decision.status === 'applied')
          await ctx.marks.saveAnswer(scope, token, key, { state: 'pending' });
      }
    }
    tell(ctx, route, scope, token, decision);
    const span = req.traceSpan;
    if (span !== undefined) {
      // The decision on the request's span (when traced): the same names as a fence's spans.
      span.setAttributes({
        [FENCE_SPAN_ATTRIBUTES.scope]: scope,
        [FENCE_SPAN_ATTRIBUTES.token]: token.toString(),
        [FENCE_SPAN_ATTRIBUTES.result]: decision.status,
      });
      if (decision.status === 'stale_fence')
        span.setAttribute(FENCE_SPAN_ATTRIBUTES.highWaterMark, decision.highWaterMark.toString());
    }
    switch (decision.status) {
      case 'stale_fence':
        return sendError(
          reply,
          new FenceHttpError(
            'stale_fence',
            `token ${token} is below the scope's mark ${decision.highWaterMark}${route.policy === '>' ? ' (or equal: one write per token)' : ''}; a newer holder has written`,
            { [MARK_HEADER]: decision.highWaterMark.toString() },
          ),
        );
      case 'version_mismatch':
        return sendError(
          reply,
          new FenceHttpError(
            'version_mismatch',
            `scope ${scope} is at version ${decision.version}, not the expected ${expectedVersion}`,
            { [VERSION_HEADER]: decision.version.toString() },
          ),
        );
      case 'duplicate':
        return replay(reply, record);
      case 'applied': {
        if (decision.wrote) ctx.metrics.wroteMark(route.name);
        const started = performance.now();
        const outcome = await ctx.forward(req, reply, {
          target,
          token,
          capture: key !== undefined,
          signal: hold?.lost,
          version: decision.version,
        });
        ctx.metrics.exchanged(route.name, outcome.kind, (performance.now() - started) / 1000);
        if (key !== undefined) await saveOutcome(ctx, scope, token, key, outcome);
        return reply;
      }
      default:
        return assertNever(decision, 'mark decision');
    }
  } catch (err) {
    if (!isLeaseholdError(err)) throw err;
    ctx.metrics.decided('unavailable', route.name);
    ctx.logger.warn(
      { scope, token: token.toString(), route: route.name, err: err.message },
      'mark store failed',
    );
    if (reply.sent) return reply;
    return sendError(
      reply,
      new FenceHttpError('unavailable', 'the mark store is unavailable; nothing was forwarded'),
    );
  } finally {
    // Not `await hold?.release()`: without a hold that would still wait a turn of the queue.
    if (hold !== undefined) await hold.release();
  }
}

async function saveOutcome(
  ctx: FencedContext,
  scope: string,
  token: bigint,
  key: string,
  outcome: ForwardOutcome,
): Promise<void> {
  const record: AnswerRecord =
    outcome.kind === 'answered'
      ? {
          state: 'answered',
          status: outcome.status,
          headers: outcome.headers,
          body: outcome.complete ? outcome.body : undefined,
        }
      : { state: outcome.kind };
  try {
    await ctx.marks.saveAnswer(scope, token, key, record);
  } catch (err) {
    // The key stays `pending`: a retry then answers `duplicate` (outcome unknown), never a second call.
    ctx.logger.warn({ scope, err: String(err) }, 'could not record an idempotent answer');
  }
}

function replay(reply: FastifyReply, record: AnswerRecord | undefined): FastifyReply {
  const r = replayOf(record);
  if (r.status === 'duplicate') return sendError(reply, new FenceHttpError('duplicate', r.message));
  void reply.code(r.httpStatus).headers(r.headers).header(REPLAYED_HEADER, 'true');
  return reply.send(r.body);
}

function tell(
  ctx: FencedContext,
  route: CompiledRoute,
  scope: string,
  token: bigint,
  d: MarkDecision,
): void {
  ctx.metrics.decided(d.status, route.name);
  // The fields are built only for a log line that is written: accepted requests log at debug.
  const accepted = d.status === 'applied';
  if (ctx.logger.isLevelEnabled(accepted ? 'debug' : 'info')) {
    const fields = { scope, token: token.toString(), route: route.name, result: d.status };
    if (accepted) ctx.logger.debug(fields, 'fenced request accepted');
    else ctx.logger.info(fields, 'fenced request refused');
  }
  if (ctx.reporter !== undefined && d.status !== 'version_mismatch') {
    ctx.reporter.onDecision({
      scope,
      token,
      status: d.status,
      ...(d.status === 'stale_fence' ? { highWaterMark: d.highWaterMark } : {}),
    });
  }
}
