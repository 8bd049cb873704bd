import type { FastifyInstance } from 'fastify';
import { invalidArgument } from '../core/errors.js';
import { validateKey, validatePrefix } from '../core/validate.js';
import { ANONYMOUS, mayRead, readablePrefixes } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import { ApiError } from './http-errors.js';
import { RECENT_EVENTS_QUERY } from './schemas.js';

/**
 * Registers `GET /v1/events/recent`: the last events the server published (a bounded ring
 * buffer, `EVENT_HISTORY_SIZE` events), oldest first, under `prefix` or for one exact `key`,
 * limited to the keys the caller's token may read. Lets the dashboard show recent history on
 * load; events also have a `seq`, so a page that opens the stream first and then asks for the
 * history can merge the two without gaps or duplicates.
 */
export function registerRecentEventRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.get(
    '/v1/events/recent',
    { schema: { querystring: RECENT_EVENTS_QUERY }, config: { auth: true } },
    (req) => {
      const q = req.query as { prefix?: string; key?: string; limit?: string };
      const limit = q.limit === undefined ? ctx.hub.historySize : Number(q.limit);
      if (limit > 500) throw invalidArgument('limit', 'must be from 1 to 500', q.limit);
      const principal = req.principal ?? ANONYMOUS;
      const allow = (k: string): boolean => mayRead(principal, k);
      if (q.key !== undefined) {
        const key = validateKey(q.key, 'key');
        if (!allow(key)) {
          throw new ApiError(
            'permission_denied',
            `token ${principal.name} may not read ${JSON.stringify(key)}`,
          );
        }
        return {
          historySize: ctx.hub.historySize,
          events: ctx.hub.recent({ key, allow }, limit),
        };
      }
      const prefix = validatePrefix(q.prefix ?? '', 'prefix');
      readablePrefixes(principal, prefix); // throws 403 when nothing under prefix is readable
      return {
        historySize: ctx.hub.historySize,
        events: ctx.hub.recent({ prefix, allow }, limit),
      };
    },
  );
}
