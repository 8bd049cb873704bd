import type { FastifyInstance } from 'fastify';
import { authorizeKey } from '../../http-service/auth.js';
import { FenceHttpError } from '../http/fence-error.js';
import type { MarkStore } from '../marks/mark-store.js';
import type { GatewayMetrics } from './metrics.js';

/** Path prefix of the gateway's own endpoints (health, metrics, marks). */
export const ADMIN_PREFIX = '/_leasehold';

/**
 * The gateway's own endpoints: `healthz` (no auth), `readyz` (the mark store answers),
 * `metrics` (Prometheus) and `marks?scope=…` (verb `read` on the scope when auth is on).
 */
export function registerAdminRoutes(
  app: FastifyInstance,
  marks: MarkStore,
  metrics: GatewayMetrics,
): void {
  app.get(`${ADMIN_PREFIX}/healthz`, (_req, reply) => reply.send({ status: 'ok' }));
  app.get(`${ADMIN_PREFIX}/readyz`, async (_req, reply) => {
    await marks.read('leasehold/readyz');
    return reply.send({ status: 'ready', marks: marks.kind });
  });
  app.get(`${ADMIN_PREFIX}/metrics`, async (_req, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  app.get(`${ADMIN_PREFIX}/marks`, async (req, reply) => {
    const scope = (req.query as Record<string, unknown>)['scope'];
    if (typeof scope !== 'string' || scope === '')
      throw new FenceHttpError('invalid_argument', 'query parameter scope is required');
    const principal = req.principal;
    if (principal !== undefined) authorizeKey(principal, 'read', scope);
    const m = await marks.read(scope);
    return reply.send({
      scope,
      highWaterMark: m.highWaterMark.toString(),
      version: m.version.toString(),
    });
  });
}
