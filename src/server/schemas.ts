/**
 * JSON schemas of the `/v1` API: Fastify validates request bodies and query strings with them
 * (without type coercion: a number is never accepted where a string is required), and the
 * OpenAPI document is built from them. Semantics (key rules, TTL range, canonical tokens) are
 * checked after the schema by the core validators, which name the field in their messages.
 */

import { LIMITS } from '../core/validate.js';

const UUID = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

const duration = (description: string): Record<string, unknown> => ({
  type: ['integer', 'string'],
  description: `${description} Whole milliseconds, or a string such as "250ms", "30s", "5m".`,
});

/** A fencing token on the wire: a decimal string, never a JSON number. */
export const TOKEN_SCHEMA = {
  type: 'string',
  description: 'Fencing token: a positive 64-bit integer as a canonical decimal string.',
} as const;

export const KEY_SCHEMA = {
  type: 'string',
  description: 'The lease key: non-empty UTF-8, at most 1 KiB, no control characters.',
} as const;

export const LEASE_ID_SCHEMA = {
  type: 'string',
  pattern: UUID,
  description: 'The lease id (a UUID). Secret to the holder: renew and release must present it.',
} as const;

export const ACQUIRE_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['key', 'ttl'],
  properties: {
    key: KEY_SCHEMA,
    ttl: duration('How long the store keeps the lease without renewal (100ms to 24h).'),
    wait: duration('How long to wait for a busy key (long poll), up to the server maximum.'),
    ownerId: {
      type: 'string',
      description: 'Who is asking, shown to observers. Defaults to the bearer token name.',
    },
    value: { type: 'string', description: 'A small value stored with the lease (at most 1 KiB).' },
    leaseId: {
      ...LEASE_ID_SCHEMA,
      description:
        'Optional lease id chosen by the client, so a retried request is idempotent. Defaults to a new random UUID.',
    },
    tokenBlock: {
      type: 'integer',
      minimum: 1,
      maximum: LIMITS.maxTokenBlock,
      description: `How many tokens the grant reserves (decision 007): the grant's own token t, and every later grant for the key gets a token of at least t + tokenBlock, so t+1 … t+tokenBlock−1 are the client's for local successors under this lease. renew and release still present t; GET /v1/leases/{key} shows the top of the block as lastToken. From 1 to ${LIMITS.maxTokenBlock}; above 1 only when /v1/info says store.capabilities.tokenBlocks is true (else 400 invalid_argument, nothing granted). Defaults to 1.`,
    },
  },
} as const;

export const RENEW_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['key', 'leaseId', 'token', 'ttl'],
  properties: {
    key: KEY_SCHEMA,
    leaseId: LEASE_ID_SCHEMA,
    token: TOKEN_SCHEMA,
    ttl: duration('The new time to live, from now at the store.'),
  },
} as const;

export const RELEASE_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['key', 'leaseId', 'token'],
  properties: { key: KEY_SCHEMA, leaseId: LEASE_ID_SCHEMA, token: TOKEN_SCHEMA },
} as const;

/** Most operations in one `POST /v1/batch`. */
export const MAX_BATCH_OPS = 128;

const { wait: _noWaitInBatch, ...ACQUIRE_FIELDS } = ACQUIRE_BODY.properties;

/**
 * One operation of a batch: the body of `/v1/acquire` (without `wait`: a batch never waits),
 * `/v1/renew` or `/v1/release`, plus `op` naming which. Validated by `op` (Ajv's
 * discriminator), so an error names the field of the operation it is in.
 */
export const BATCH_OP = {
  type: 'object',
  required: ['op'],
  discriminator: { propertyName: 'op' },
  oneOf: [
    {
      ...ACQUIRE_BODY,
      required: ['op', ...ACQUIRE_BODY.required],
      properties: { op: { const: 'acquire' }, ...ACQUIRE_FIELDS },
    },
    {
      ...RENEW_BODY,
      required: ['op', ...RENEW_BODY.required],
      properties: { op: { const: 'renew' }, ...RENEW_BODY.properties },
    },
    {
      ...RELEASE_BODY,
      required: ['op', ...RELEASE_BODY.required],
      properties: { op: { const: 'release' }, ...RELEASE_BODY.properties },
    },
  ],
} as const;

export const BATCH_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['ops'],
  properties: {
    ops: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_BATCH_OPS,
      items: BATCH_OP,
      description:
        'Operations started in this order; each is answered as its own request would be.',
    },
  },
} as const;

export const BATCH_RESULTS = {
  type: 'object',
  required: ['results'],
  properties: {
    results: {
      type: 'array',
      description: 'One result per operation, in the order of ops.',
      items: {
        type: 'object',
        required: ['httpStatus', 'body'],
        properties: {
          httpStatus: {
            type: 'integer',
            description: 'The status the operation would have had as its own request.',
          },
          body: {
            type: 'object',
            description: 'The body it would have had: its result, or {"error":{code,message}}.',
          },
        },
      },
    },
  },
} as const;

/** The largest int64, as fencing tokens and high-water marks are bounded by it. */
const DECIMAL_0_TO_INT64 = '^(0|[1-9][0-9]{0,18})$';

export const FENCE_DECISION_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['key', 'token', 'result'],
  properties: {
    key: {
      ...KEY_SCHEMA,
      description:
        'The lease key whose token the fence checked (auth prefixes and event filters apply to it).',
    },
    token: { ...TOKEN_SCHEMA, description: 'The token the writer presented.' },
    result: {
      type: 'string',
      enum: ['applied', 'duplicate', 'stale_fence'],
      description: "The fence's answer.",
    },
    scope: {
      type: 'string',
      description:
        'The fencing scope, when it differs from the key (same rules as a key). Defaults to none.',
    },
    resource: {
      type: 'string',
      pattern: '^[\\x21-\\x7e]{1,128}$',
      description:
        'A name for the protected resource, e.g. "billing-db": 1 to 128 printable ASCII characters without spaces.',
    },
    highWaterMark: {
      type: 'string',
      pattern: DECIMAL_0_TO_INT64,
      description:
        'With stale_fence only: the mark that refused the token, a decimal string from "0".',
    },
  },
} as const;

export const LIST_QUERY = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prefix: { type: 'string', description: 'Only keys starting with this. Defaults to all.' },
    limit: {
      type: 'string',
      pattern: '^[1-9][0-9]{0,4}$',
      description: 'At most this many leases (1 to 10000). Defaults to 1000.',
    },
  },
} as const;

export const EVENTS_QUERY = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prefix: { type: 'string', description: 'Only events on keys starting with this.' },
    key: { type: 'string', description: 'Only events on this exact key (also store changes).' },
  },
} as const;

export const RECENT_EVENTS_QUERY = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prefix: { type: 'string', description: 'Only events on keys starting with this.' },
    key: { type: 'string', description: 'Only events on this exact key.' },
    limit: {
      type: 'string',
      pattern: '^[1-9][0-9]{0,2}$',
      description: 'At most this many, the newest (1 to 500). Defaults to all kept.',
    },
  },
} as const;

/** One event of the server's stream, as `GET /v1/events` and `GET /v1/events/recent` send it. */
export const SERVER_EVENT = {
  type: 'object',
  required: ['seq', 'type', 'key', 'at'],
  properties: {
    seq: { type: 'integer', description: 'Increases with every event the server publishes.' },
    type: {
      enum: ['acquired', 'renewed', 'released', 'lost', 'expired', 'changed', 'fence'],
    },
    key: { type: 'string' },
    token: { type: 'string', pattern: '^[0-9]+$' },
    ownerId: { type: 'string' },
    leaseIdPrefix: { type: 'string' },
    ttlMs: { type: 'integer' },
    tokenBlock: { type: 'integer' },
    result: { enum: ['applied', 'duplicate', 'stale_fence'] },
    scope: { type: 'string' },
    resource: { type: 'string' },
    highWaterMark: { type: 'string', pattern: '^[0-9]+$' },
    reportedBy: { type: 'string' },
    at: { type: 'integer', description: 'Wall-clock ms when the server saw it (display only).' },
  },
} as const;

export const RECENT_EVENTS = {
  type: 'object',
  required: ['historySize', 'events'],
  properties: {
    historySize: { type: 'integer', description: 'How many recent events the server keeps.' },
    events: { type: 'array', items: SERVER_EVENT, description: 'Oldest first.' },
  },
} as const;

const HOLDER = {
  type: 'object',
  required: ['ownerId', 'token', 'remainingMs', 'leaseIdPrefix'],
  properties: {
    ownerId: { type: 'string' },
    token: TOKEN_SCHEMA,
    remainingMs: { type: 'integer', description: 'Remaining time by the store clock.' },
    leaseIdPrefix: { type: 'string', description: 'First 8 characters of the lease id.' },
    value: { type: 'string' },
  },
} as const;

export const LEASE_STATE = {
  type: 'object',
  required: ['key', 'lastToken', 'holder'],
  properties: {
    key: KEY_SCHEMA,
    lastToken: {
      type: 'string',
      description:
        'Highest token ever granted for the key, or reserved by a grant with a tokenBlock ("0" if never). The holder\'s own token is holder.token.',
    },
    holder: { oneOf: [HOLDER, { type: 'null' }] },
  },
} as const;

export const ERROR_BODY = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: {
          type: 'string',
          enum: [
            'invalid_argument',
            'unauthenticated',
            'permission_denied',
            'not_found',
            'method_not_allowed',
            'request_timeout',
            'busy',
            'not_owner',
            'lost',
            'payload_too_large',
            'uri_too_long',
            'headers_too_large',
            'unavailable',
            'internal',
          ],
        },
        message: { type: 'string' },
      },
    },
    holder: HOLDER,
    retryAfterMs: { type: 'integer' },
  },
} as const;

export const ACQUIRED = {
  type: 'object',
  required: ['status', 'key', 'leaseId', 'token', 'ownerId', 'ttlMs', 'waitedMs'],
  properties: {
    status: { type: 'string', enum: ['acquired'] },
    key: KEY_SCHEMA,
    leaseId: LEASE_ID_SCHEMA,
    token: TOKEN_SCHEMA,
    ownerId: { type: 'string' },
    ttlMs: { type: 'integer' },
    waitedMs: { type: 'integer' },
    expiresAtWallMs: {
      type: 'integer',
      description: 'Store expiry as wall-clock ms, display only.',
    },
  },
} as const;

export const ELECTION_PARAMS = {
  type: 'object',
  required: ['name'],
  properties: {
    name: {
      type: 'string',
      minLength: 1,
      description: 'The election name (percent-encoded); its lease key is election/NAME.',
    },
  },
} as const;

export const CAMPAIGN_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['ttl'],
  properties: {
    ttl: ACQUIRE_BODY.properties.ttl,
    wait: {
      ...ACQUIRE_BODY.properties.wait,
      description:
        'How long to wait to lead (long poll), up to the server maximum; 0 or absent: do not wait. Whole milliseconds or a string such as "30s".',
    },
    ownerId: ACQUIRE_BODY.properties.ownerId,
    value: {
      type: 'string',
      description: 'The leader value followers read, e.g. its address (at most 1 KiB).',
    },
    leaseId: ACQUIRE_BODY.properties.leaseId,
  },
} as const;

export const RESIGN_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['leaseId', 'epoch'],
  properties: {
    leaseId: LEASE_ID_SCHEMA,
    epoch: { ...TOKEN_SCHEMA, description: 'The epoch campaign answered (the lease token).' },
  },
} as const;

export const ELECTED = {
  type: 'object',
  required: ['status', 'name', 'key', 'leaseId', 'epoch', 'ownerId', 'ttlMs', 'waitedMs'],
  properties: {
    status: { type: 'string', enum: ['elected'] },
    name: { type: 'string' },
    key: KEY_SCHEMA,
    leaseId: LEASE_ID_SCHEMA,
    epoch: {
      ...TOKEN_SCHEMA,
      description:
        'The leader epoch (the fencing token of election/NAME): send it with every protected write; renew with POST /v1/renew {key, leaseId, token: epoch, ttl}.',
    },
    ownerId: { type: 'string' },
    ttlMs: { type: 'integer' },
    waitedMs: { type: 'integer' },
    expiresAtWallMs: { type: 'integer' },
  },
} as const;

export const ELECTION_STATE = {
  type: 'object',
  required: ['name', 'key', 'lastEpoch', 'leader'],
  properties: {
    name: { type: 'string' },
    key: KEY_SCHEMA,
    lastEpoch: {
      type: 'string',
      description:
        'Highest epoch ever granted, or reserved by an acquire with a tokenBlock ("0" if never).',
    },
    leader: {
      oneOf: [
        {
          type: 'object',
          required: ['ownerId', 'epoch', 'remainingMs', 'leaseIdPrefix'],
          properties: {
            ownerId: { type: 'string' },
            epoch: TOKEN_SCHEMA,
            remainingMs: { type: 'integer' },
            leaseIdPrefix: { type: 'string' },
            value: { type: 'string' },
          },
        },
        { type: 'null' },
      ],
    },
  },
} as const;

export const INFO = {
  type: 'object',
  required: ['name', 'version', 'store', 'auth', 'limits'],
  properties: {
    name: { const: 'leasehold' },
    version: { type: 'string' },
    store: {
      type: 'object',
      required: ['kind', 'capabilities'],
      properties: {
        kind: { type: 'string', description: 'The store behind the server: sqlite, postgres, …' },
        capabilities: {
          type: 'object',
          required: ['timeAuthority', 'tokenDurability', 'minTtlMs', 'tokenBlocks'],
          properties: {
            timeAuthority: { type: 'string', enum: ['store', 'machine_monotonic', 'injected'] },
            tokenDurability: {
              type: 'string',
              enum: ['volatile', 'durable', 'replicated', 'best_effort'],
            },
            watch: { type: 'string', enum: ['push', 'none'] },
            sharedAcrossProcesses: { type: 'boolean' },
            minTtlMs: { type: 'integer' },
            ttlGranularityMs: { type: 'integer' },
            tokenBlocks: {
              type: 'boolean',
              description:
                'Whether acquire accepts a tokenBlock above 1 (the store reserves the block; decision 007).',
            },
          },
        },
      },
    },
    auth: { type: 'string', enum: ['none', 'bearer'] },
    limits: {
      type: 'object',
      properties: {
        bodyLimitBytes: { type: 'integer' },
        maxWaitMs: { type: 'integer' },
        batchMaxOps: { type: 'integer' },
        batchBodyLimitBytes: { type: 'integer' },
        maxTokenBlock: {
          type: 'integer',
          description: 'The largest tokenBlock an acquire may ask for.',
        },
      },
    },
  },
} as const;
