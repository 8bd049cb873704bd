import { LeaseholdError } from '../../core/errors.js';
import type { StoreAcquireRequest, StoreAcquireResult } from '../../core/store.js';
import type { HolderInfo, LeaseState } from '../../core/types.js';
import { parseToken } from '../../core/validate.js';
import { answerCode, unexpectedAnswer, type Answer } from './errors.js';

/** The JSON body of an acquire (without `wait`): what `/v1/acquire` and a batch carry. */
export function acquireBody(request: StoreAcquireRequest): Record<string, unknown> {
  return {
    key: request.key,
    ttl: request.ttlMs,
    ownerId: request.ownerId,
    leaseId: request.leaseId,
    ...(request.value === undefined ? {} : { value: request.value }),
    ...(request.tokenBlock === undefined || request.tokenBlock <= 1
      ? {}
      : { tokenBlock: request.tokenBlock }),
    ...(request.lockDelayMs === undefined ? {} : { lockDelay: request.lockDelayMs }),
    ...(request.ignoreLockDelay === true ? { ignoreLockDelay: true } : {}),
  };
}

/** An acquire's answer: `acquired` (200) or `busy` (409); anything else throws. */
export function acquireResult(a: Answer): StoreAcquireResult {
  if (a.status === 200) {
    const expires = a.body['expiresAtWallMs'];
    return {
      status: 'acquired',
      token: tokenOf(a.body['token']),
      ...(typeof expires === 'number' ? { expiresAtWallMs: expires } : {}),
    };
  }
  if (a.status === 409 && answerCode(a) === 'busy') {
    const retry = a.body['retryAfterMs'];
    return {
      status: 'busy',
      holder: holderOf(a.body['holder']),
      retryAfterMs: typeof retry === 'number' && retry >= 0 ? retry : 0,
      ...(a.body['reason'] === 'lock_delay' ? { reason: 'lock_delay' as const } : {}),
    };
  }
  throw unexpectedAnswer(a, 'acquire');
}

/** A token the server sent; `ERR_PROTOCOL` when it is not a canonical positive decimal. */
export function tokenOf(value: unknown): bigint {
  try {
    return parseToken(value, 'token');
  } catch (err) {
    throw new LeaseholdError(
      'ERR_PROTOCOL',
      `leasehold server sent an invalid token: ${String(err)}`,
      { cause: err },
    );
  }
}

/** The holder of a busy answer or a state. */
export function holderOf(raw: unknown): HolderInfo {
  const h = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  return {
    ownerId: typeof h['ownerId'] === 'string' ? h['ownerId'] : '',
    token: tokenOf(h['token']),
    remainingMs: typeof h['remainingMs'] === 'number' ? h['remainingMs'] : 0,
    leaseIdPrefix: typeof h['leaseIdPrefix'] === 'string' ? h['leaseIdPrefix'] : '',
    value: typeof h['value'] === 'string' ? h['value'] : undefined,
  };
}

/** A key's state, as `GET /v1/leases/…` answers it. */
export function stateOf(raw: Record<string, unknown>): LeaseState {
  const key = raw['key'];
  if (typeof key !== 'string')
    throw new LeaseholdError('ERR_PROTOCOL', 'leasehold server sent a state without key');
  const last = raw['lastToken'];
  return {
    key,
    lastToken: last === '0' ? 0n : tokenOf(last),
    holder:
      raw['holder'] === null || raw['holder'] === undefined ? undefined : holderOf(raw['holder']),
  };
}
