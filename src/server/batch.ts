import type { FastifyInstance } from 'fastify';
import { validateKey } from '../core/validate.js';
import { acquireRoute } from './acquire-route.js';
import { invalidArgument } from '../core/errors.js';
import {
  principalOf,
  releaseRoute,
  type AcquireBody,
  type ReleaseBody,
  type RenewBody,
} from './api.js';
import { clientWatch, type ClientWatch } from './client-watch.js';
import type { Principal } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import { reportApiError, toApiError } from './http-errors.js';
import { renewTogether } from './renew-route.js';
import { BATCH_BODY, MAX_BATCH_OPS, MAX_BATCH_RENEWALS } from './schemas.js';

type BatchOp =
  | ({ op: 'acquire' } & AcquireBody)
  | ({ op: 'renew' } & RenewBody)
  | ({ op: 'release' } & ReleaseBody);

/** What one operation of a batch answered: the status and body of its own request. */
export interface BatchResult {
  readonly httpStatus: number;
  readonly body: object;
}

/**
 * Registers `POST /v1/batch`: acquire (without waiting), renew and release operations in one
 * request, each authorised, validated and answered exactly as its own request would be. The
 * renewals of a batch go to the store as one `renewMany` call when the store has it (one
 * store round trip for all of them, see renew-route.ts); the other operations are started in
 * their order and run concurrently, so a store that groups the requests of one moment
 * (SQLite's group commit, Redis' pipelining) serves them together; one operation's error does
 * not touch the others. At most {@link MAX_BATCH_OPS} operations, or up to
 * {@link MAX_BATCH_RENEWALS} when every one is a renewal (what `HttpLeaseStore.renewMany`
 * sends). `HttpLeaseStore` sends the operations of
 * one event-loop turn this way: one HTTP exchange instead of one each.
 *
 * A body that fails the schema is refused whole (400, nothing run), as is one over
 * `bodyLimit` (413).
 */
export function registerBatchRoute(
  app: FastifyInstance,
  ctx: ServerContext,
  bodyLimit: number,
): void {
  app.post(
    '/v1/batch',
    { schema: { body: BATCH_BODY }, config: { auth: true }, bodyLimit },
    async (req, reply) => {
      const principal = principalOf(req);
      const client = clientWatch(reply);
      const ops = (req.body as { ops: BatchOp[] }).ops;
      if (ops.length > MAX_BATCH_OPS && ops.some((op) => op.op !== 'renew')) {
        throw invalidArgument(
          'ops',
          `must hold at most ${MAX_BATCH_OPS} operations (${MAX_BATCH_RENEWALS} when all are renewals)`,
          ops.length,
        );
      }
      const fail = (err: unknown): BatchResult => failed(ctx, req.id, err);
      const renewals = ops.filter((op) => op.op === 'renew');
      const renewed = renewTogether(ctx, principal, renewals);
      let r = 0;
      // Started in order (each runs synchronously up to its store request), answered together.
      const results = await Promise.all(
        ops.map((op) =>
          (op.op === 'renew' ? renewed[r++]! : runOp(ctx, principal, client, op)).then(
            succeeded,
            fail,
          ),
        ),
      );
      return { results };
    },
  );
}

/** An acquire or release of a batch (its renewals go together, see `renewTogether`). */
async function runOp(
  ctx: ServerContext,
  principal: Principal,
  client: ClientWatch,
  op: Exclude<BatchOp, { op: 'renew' }>,
): Promise<object> {
  switch (op.op) {
    case 'acquire':
      return acquireRoute(ctx, principal, client, validateKey(op.key, 'key'), op);
    case 'release':
      return releaseRoute(
        ctx,
        principal,
        validateKey(op.key, 'key'),
        op.leaseId,
        op.token,
        'token',
      );
  }
}

function succeeded(body: object): BatchResult {
  return { httpStatus: 200, body };
}

/** An operation's error as its own request's error handler would have answered it. */
function failed(ctx: ServerContext, reqId: string, err: unknown): BatchResult {
  const api = toApiError(err);
  reportApiError(api, err, { logger: ctx.logger, metrics: ctx.metrics, reqId, route: '/v1/batch' });
  return { httpStatus: api.status, body: api.body() };
}
