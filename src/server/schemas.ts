/**
 * JSON schemas of the `/v1` API: Fastify validates request bodies and query strings with them
 * (without type coercion: a number is never accepted where a string is required), and the
 * OpenAPI document is built from them. Semantics (key rules, TTL range, canonical tokens) are
 * checked after the schema by the core validators, which name the field in their messages.
 */

import { MAX_RENEWALS_PER_CALL } from '../core/renewal-batch.js';
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
    lockDelay: duration(
      'Lock-delay (0 to 1h): if this lease ends by expiry rather than release, the key stays busy (reason lock_delay) for this much longer. Only when /v1/info says store.capabilities.lockDelay is true (else 400 invalid_argument). Defaults to none.',
    ),
    ignoreLockDelay: {
      type: 'boolean',
      description:
        'Grant even during the lock-delay an expired holder left (for callers whose writes are fenced). Defaults to false.',
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

/**
 * Most operations in one `POST /v1/batch` whose operations are all renewals: the client's
 * largest `renewMany` call (MAX_RENEWALS_PER_CALL), so one call is one request and one store
 * call. Renewals need no waiting or hand-off state, and the body limit still bounds the size.
 */
export const MAX_BATCH_RENEWALS = MAX_RENEWALS_PER_CALL;

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
      maxItems: MAX_BATCH_RENEWALS,
      items: BATCH_OP,
      description: `Operations started in this order; each is answered as its own request would be. At most ${MAX_BATCH_OPS}, or up to ${MAX_BATCH_RENEWALS} when every operation is a renew (sent to the store as one renewal call).`,
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
    op: {
      type: 'string',
      enum: ['write', 'claim'],
      description:
        'What was decided: a write (the default) or a claim before start (no data written; result applied or stale_fence). A claim is published as a `claim` event.',
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
