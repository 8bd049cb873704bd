import type { Attributes } from '@opentelemetry/api';
import type { FastifyRequest } from 'fastify';
import { leaseIdPrefix } from '../core/ids.js';
import { toApiError } from './http-errors.js';

/**
 * The lease attributes of the server's request spans: the same names as the client's spans
 * (`leasehold/otel`), so a trace reads the same on both sides. Tokens are decimal strings.
 */
export const LEASE_SPAN_ATTRIBUTES = Object.freeze({
  operation: 'leasehold.operation',
  key: 'leasehold.key',
  owner: 'leasehold.owner',
  token: 'leasehold.token',
  leaseIdPrefix: 'leasehold.lease_id_prefix',
  result: 'leasehold.result',
  fenceResult: 'leasehold.fence.result',
});

/** The lease operation of each route whose spans carry lease attributes. */
const OPERATIONS: Readonly<Record<string, string>> = Object.freeze({
  '/v1/acquire': 'acquire',
  '/v1/renew': 'renew',
  '/v1/release': 'release',
  '/v1/fence-decisions': 'fence_decision',
  '/v1/batch': 'batch',
});

const A = LEASE_SPAN_ATTRIBUTES;

/** Whether the server's route at `url` gets request spans: all of the API but event streams. */
export function tracedRoute(url: string): boolean {
  return url.startsWith('/v1/') && !url.startsWith('/v1/events');
}

/**
 * The lease attributes of one answered request: what it asked (key, owner, token) and what the
 * server decided (`leasehold.result`: the answer's `status`, or the error's code; a request
 * refused before its handler, by the body's schema, has none). For a fence
 * decision the result is the fence's own decision (`applied`, `duplicate`, `stale_fence`).
 */
export function leaseAttributes(
  req: FastifyRequest,
  answer: { readonly payload: unknown } | { readonly error: unknown },
): Attributes | undefined {
  const url = req.routeOptions.url;
  const operation = url === undefined ? undefined : OPERATIONS[url];
  if (operation === undefined) return undefined;
  const body = (req.body ?? {}) as Record<string, unknown>;
  const payload = 'payload' in answer ? answer.payload : undefined;
  const answered = (payload ?? {}) as Record<string, unknown>;
  const attributes: Attributes = { [A.operation]: operation };
  if (typeof body['key'] === 'string') attributes[A.key] = body['key'];
  if (typeof body['ownerId'] === 'string') attributes[A.owner] = body['ownerId'];
  const token = answered['token'] ?? body['token'];
  if (typeof token === 'string' || typeof token === 'number') attributes[A.token] = String(token);
  const leaseId = answered['leaseId'] ?? body['leaseId'];
  if (typeof leaseId === 'string')
    attributes[A.leaseIdPrefix] = leaseIdPrefix(leaseId.toLowerCase());
  if ('error' in answer) attributes[A.result] = toApiError(answer.error).code;
  else if (operation === 'fence_decision' && typeof body['result'] === 'string')
    attributes[A.result] = body['result'];
  else if (typeof answered['status'] === 'string') attributes[A.result] = answered['status'];
  if (operation === 'fence_decision' && typeof body['result'] === 'string')
    attributes[A.fenceResult] = body['result'];
  return attributes;
}
