import type { FastifyInstance } from 'fastify';
import { invalidArgument } from '../core/errors.js';
import { parseToken, validateKey } from '../core/validate.js';
import { ANONYMOUS, authorizeKey } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import { FENCE_DECISION_BODY } from './schemas.js';

interface FenceDecisionBody {
  key: unknown;
  token: unknown;
  result: 'applied' | 'duplicate' | 'stale_fence';
  scope?: unknown;
  resource?: string;
  highWaterMark?: string;
  op?: 'write' | 'claim';
}

const INT64_MAX = 9223372036854775807n;

/**
 * Registers `POST /v1/fence-decisions`: a protected resource's fence reports what it decided
 * (`applied`, `duplicate`, `stale_fence`) about a write made with a token of lease `key`. The
 * server stores nothing: it publishes a `fence` event on the event stream (filtered by key
 * like every event) and counts `leasehold_fence_decisions_total{result}`. Fences run at the
 * resource, not in this server, so this is how their decisions (above all stale rejections)
 * become visible next to the leases. With `op: 'claim'` (claim before start) it publishes a
 * `claim` event instead, and counts nothing. Needs the `fence` verb on the key's prefix.
 */
export function registerFenceRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.post(
    '/v1/fence-decisions',
    { schema: { body: FENCE_DECISION_BODY }, config: { auth: true } },
    (req) => {
      const b = req.body as FenceDecisionBody;
      const key = validateKey(b.key, 'key');
      const principal = req.principal ?? ANONYMOUS;
      authorizeKey(principal, 'fence', key);
      const token = parseToken(b.token, 'token');
      const scope = b.scope === undefined ? undefined : validateKey(b.scope, 'scope');
      let highWaterMark: string | undefined;
      if (b.highWaterMark !== undefined) {
        if (b.result !== 'stale_fence') {
          throw invalidArgument(
            'highWaterMark',
            'is only accepted with result stale_fence',
            b.highWaterMark,
          );
        }
        if (BigInt(b.highWaterMark) > INT64_MAX) {
          throw invalidArgument(
            'highWaterMark',
            'must be at most 9223372036854775807',
            b.highWaterMark,
          );
        }
        highWaterMark = b.highWaterMark;
      }
      const claim = b.op === 'claim';
      if (claim && b.result === 'duplicate')
        throw invalidArgument('result', 'a claim is applied or stale_fence', b.result);
      // The decisions counter counts writes; a claim shows on the stream only.
      if (!claim) ctx.metrics.fenceDecisions.inc({ result: b.result });
      ctx.hub.publish({
        type: claim ? 'claim' : 'fence',
        key,
        token: token.toString(),
        result: b.result,
        ...(claim
          ? { scope: scope ?? key }
          : scope === undefined || scope === key
            ? {}
            : { scope }),
        ...(b.resource === undefined ? {} : { resource: b.resource }),
        ...(highWaterMark === undefined ? {} : { highWaterMark }),
        reportedBy: principal.name,
      });
      const log = {
        key,
        token: token.toString(),
        resource: b.resource,
        reportedBy: principal.name,
      };
      if (claim) {
        ctx.logger.info({ ...log, result: b.result, highWaterMark }, 'claim reported');
      } else if (b.result === 'stale_fence') {
        ctx.logger.info({ ...log, highWaterMark }, 'a fence refused a stale token');
      } else {
        ctx.logger.debug({ ...log, result: b.result }, 'fence decision');
      }
      return { status: 'published' };
    },
  );
}
