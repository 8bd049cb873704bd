/**
 * JSON schemas of what the `/v1` API answers: events, lease states, grants, elections, errors
 * and `/v1/info`. The OpenAPI document is built from them and the tests check answers against
 * them; the request schemas are in `schemas.ts`.
 */

import { KEY_SCHEMA, LEASE_ID_SCHEMA, TOKEN_SCHEMA } from './schemas.js';

/** One event of the server's stream, as `GET /v1/events` and `GET /v1/events/recent` send it. */
export const SERVER_EVENT = {
  type: 'object',
  required: ['seq', 'type', 'key', 'at'],
  properties: {
    seq: { type: 'integer', description: 'Increases with every event the server publishes.' },
    type: {
      enum: ['acquired', 'renewed', 'released', 'lost', 'expired', 'changed', 'fence', 'claim'],
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
    reason: {
      enum: ['failover', 'restore'],
      description:
        '`lost` events of a lease the store ended when it changed incarnation (a failover or a restore).',
    },
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
    reason: {
      type: 'string',
      enum: ['lock_delay'],
      description:
        'On busy: lock_delay when the key has no live holder but its last one expired less than its lock-delay ago (retryAfterMs is the delay left). Absent for a live holder.',
    },
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
    grantSentAfterMs: {
      type: 'integer',
      description:
        'After a wait: ms from receiving the request to sending the store request that granted the lease (rounded down). The lease is valid at the store from no earlier than that, so a client may measure its validity from its own send time plus this.',
    },
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
            lockDelay: {
              type: 'boolean',
              description: 'Whether acquire accepts a lockDelay (the store keeps lock-delays).',
            },
            expiryLagMs: {
              type: 'integer',
              description:
                'How much longer than its TTL a dead holder’s key may stay taken at the store, by its design (etcd: session headroom and expiry check). Absent means 0.',
            },
            expiryObservedBy: {
              type: 'string',
              enum: ['store', 'client'],
              description:
                'Whose clock expiresAtWallMs is on: the store’s own, or (etcd, which answers a TTL) the server’s clock when the answer arrived plus the TTL. Absent means store.',
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
        batchMaxRenewals: {
          type: 'integer',
          description:
            'The most operations of a POST /v1/batch whose operations are all renew (one store call).',
        },
        batchBodyLimitBytes: { type: 'integer' },
        maxTokenBlock: {
          type: 'integer',
          description: 'The largest tokenBlock an acquire may ask for.',
        },
      },
    },
  },
} as const;
