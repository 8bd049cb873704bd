import {
  ACQUIRED,
  ELECTED,
  ELECTION_STATE,
  ERROR_BODY,
  INFO,
  LEASE_STATE,
  RECENT_EVENTS,
} from './answer-schemas.js';
import {
  ACQUIRE_BODY,
  BATCH_BODY,
  BATCH_RESULTS,
  CAMPAIGN_BODY,
  EVENTS_QUERY,
  FENCE_DECISION_BODY,
  LIST_QUERY,
  RELEASE_BODY,
  RENEW_BODY,
  RECENT_EVENTS_QUERY,
  RESIGN_BODY,
} from './schemas.js';

function json(schema: unknown, description: string): Record<string, unknown> {
  return { description, content: { 'application/json': { schema } } };
}

const err = (description: string): Record<string, unknown> => json(ERROR_BODY, description);

function queryParams(schema: {
  properties: Record<string, { description?: string }>;
}): Record<string, unknown>[] {
  return Object.entries(schema.properties).map(([name, s]) => ({
    name,
    in: 'query',
    required: false,
    schema: { type: 'string' },
    description: s.description,
  }));
}

const COMMON_ERRORS = {
  '400': err(
    'invalid_argument: malformed JSON, a wrong type, or a value breaking a rule; the message names the field.',
  ),
  '401': err('unauthenticated: no or unknown bearer token.'),
  '403': err('permission_denied: the token may not use this verb or key prefix.'),
  '413': err('payload_too_large: the body is larger than the server accepts.'),
  '503': err('unavailable: the lease store could not answer.'),
};

const ELECTION_NAME = {
  name: 'name',
  in: 'path',
  required: true,
  schema: { type: 'string' },
  description: 'The election name, percent-encoded; its lease key is election/NAME.',
};

/** The OpenAPI 3.1 document of the `/v1` API, served at `/v1/openapi.json`. */
export function openApiDocument(version: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'leasehold',
      version,
      description:
        'Leases with fencing tokens over HTTP. Tokens are decimal strings. Errors are {"error":{"code","message"}}. A busy key answers 409 with code "busy", the holder and retryAfterMs. Any request may also be answered, with the same error body, 400 (malformed HTTP, no Host header), 404 (no such path), 405 (another method; see Allow), 408, 413, 414, 431 (headers too large) or 503 (the server is shutting down).',
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
    security: [{ bearer: [] }],
    paths: {
      '/v1/acquire': {
        post: {
          summary: 'Acquire a lease, optionally waiting (long poll) for a busy key',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: ACQUIRE_BODY } },
          },
          responses: {
            '200': json(
              ACQUIRED,
              'acquired: keep leaseId secret; send token with every protected write.',
            ),
            '409': err('busy: another owner holds the key; see holder and retryAfterMs.'),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/renew': {
        post: {
          summary: 'Renew a held lease',
          requestBody: { required: true, content: { 'application/json': { schema: RENEW_BODY } } },
          responses: {
            '200': json(
              {
                type: 'object',
                properties: { status: { const: 'renewed' }, expiresAtWallMs: { type: 'integer' } },
              },
              'renewed',
            ),
            '409': err('not_owner: the token belongs to a live lease with another lease id.'),
            '410': err('lost: the lease expired or was taken over; it never comes back.'),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/release': {
        post: {
          summary: 'Release a held lease (conditional on lease id and token)',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: RELEASE_BODY } },
          },
          responses: {
            '200': json(
              { type: 'object', properties: { status: { const: 'released' } } },
              'released',
            ),
            '409': err('not_owner: no live lease with this id and token.'),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/batch': {
        post: {
          summary:
            'Acquire (no wait), renew and release operations in one request, each answered as its own request would be',
          requestBody: { required: true, content: { 'application/json': { schema: BATCH_BODY } } },
          responses: {
            '200': json(
              BATCH_RESULTS,
              "one result per operation, in order; an operation error is its result, not the batch's",
            ),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/leases': {
        get: {
          summary: 'List live leases by key prefix, in key order',
          parameters: queryParams(LIST_QUERY),
          responses: {
            '200': json(
              { type: 'object', properties: { leases: { type: 'array', items: LEASE_STATE } } },
              'live leases',
            ),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/leases/{key}': {
        get: {
          summary: 'One key: its last token and live holder',
          parameters: [
            {
              name: 'key',
              in: 'path',
              required: true,
              schema: { type: 'string' },
              description: 'The key, percent-encoded (slashes may stay).',
            },
          ],
          responses: { '200': json(LEASE_STATE, 'the key state'), ...COMMON_ERRORS },
        },
      },
      '/v1/events': {
        get: {
          summary:
            'Server-sent events: acquired, renewed, released, lost, expired (best effort), changed, fence (decisions reported by fences)',
          parameters: queryParams(EVENTS_QUERY),
          responses: {
            '200': { description: 'text/event-stream; the first event is "ready".' },
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/events/recent': {
        get: {
          summary:
            'The last events the server published (it keeps the last 500 in memory, oldest dropped first), oldest first: what a page shows before its event stream has anything new. Filtered by key prefix or key, and by what the token may read. Events are deduplicated against the stream by seq.',
          parameters: queryParams(RECENT_EVENTS_QUERY),
          responses: { '200': json(RECENT_EVENTS, 'recent events'), ...COMMON_ERRORS },
        },
      },
      '/v1/fence-decisions': {
        post: {
          summary:
            'Report a fence decision made at a protected resource: published as a "fence" event and counted in leasehold_fence_decisions_total{result}; nothing is stored. Needs the fence verb on the key.',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: FENCE_DECISION_BODY } },
          },
          responses: {
            '200': json(
              { type: 'object', properties: { status: { const: 'published' } } },
              'published',
            ),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/elections/{name}/campaign': {
        post: {
          summary:
            'Campaign to lead election/NAME, waiting up to wait; the leader renews via /v1/renew (key election/NAME, token = epoch)',
          parameters: [ELECTION_NAME],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: CAMPAIGN_BODY } },
          },
          responses: {
            '200': json(
              ELECTED,
              'elected: keep leaseId secret; send epoch with every protected write.',
            ),
            '409': err('busy: another leader holds the election and the wait ran out.'),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/elections/{name}': {
        get: {
          summary:
            'Observe: current leader, epoch and value (changes pushed on /v1/events?key=election/NAME)',
          parameters: [ELECTION_NAME],
          responses: { '200': json(ELECTION_STATE, 'the election state'), ...COMMON_ERRORS },
        },
      },
      '/v1/elections/{name}/resign': {
        post: {
          summary: 'Resign: release the leadership (conditional on lease id and epoch)',
          parameters: [ELECTION_NAME],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: RESIGN_BODY } },
          },
          responses: {
            '200': json(
              { type: 'object', properties: { status: { const: 'resigned' } } },
              'resigned',
            ),
            '409': err('not_owner: no live leadership with this lease id and epoch.'),
            ...COMMON_ERRORS,
          },
        },
      },
      '/v1/info': {
        get: {
          summary: 'Server version, store kind and capabilities, auth mode, limits',
          security: [],
          responses: { '200': json(INFO, 'info') },
        },
      },
      '/healthz': {
        get: { summary: 'Liveness', security: [], responses: { '200': { description: 'ok' } } },
      },
      '/readyz': {
        get: {
          summary: 'Readiness: fails while the store is unreachable',
          security: [],
          responses: { '200': { description: 'ready' }, '503': err('store unreachable') },
        },
      },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics',
          security: [],
          responses: { '200': { description: 'text/plain' } },
        },
      },
    },
  };
}
