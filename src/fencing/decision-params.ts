/**
 * The parameters of the PostgreSQL fence's decision function, checked: one rule for
 * `PostgresFence` and for `fenceIn`/`claimIn` inside the caller's transaction. No database
 * package is loaded here (the in-transaction adapters load none).
 */
import { invalidArgument } from '../core/errors.js';
import { requireObject } from '../core/runtime/options.js';
import { parseToken, validateKey } from '../core/validate.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A fenced write as both callers take it. */
export interface DecisionRequest {
  readonly scope: string;
  readonly token: bigint | string;
  readonly idempotencyKey?: string;
  readonly lease?: { readonly key: string; readonly leaseId: string };
}

/**
 * A checked request: the decision's parameters ($1 scope, $2 token, $3 policy, $4 idempotency
 * key, $5 lease key, $6 lease id, $7 lease table), its key and lease.
 */
export interface DecisionParams {
  readonly params: (string | null)[];
  readonly key: string | undefined;
  readonly lease: DecisionRequest['lease'];
}

/** Validates a fenced write request (bad input: `ERR_INVALID_ARGUMENT` naming the field). */
export function writeParams(
  request: DecisionRequest,
  policy: '>=' | '>',
  leaseTable: string,
): DecisionParams {
  requireObject(request, 'request');
  const scope = validateKey(request.scope, 'scope');
  const token = parseToken(request.token, 'token');
  const key = request.idempotencyKey;
  if (key !== undefined) validateKey(key, 'idempotencyKey');
  const lease = request.lease;
  if (lease !== undefined) {
    requireObject(lease, 'lease');
    validateKey(lease.key, 'lease.key');
    if (typeof lease.leaseId !== 'string' || !UUID.test(lease.leaseId)) {
      throw invalidArgument('lease.leaseId', 'must be a lease id (a UUID)', lease.leaseId);
    }
  }
  const params = [
    scope,
    token.toString(),
    policy,
    key ?? null,
    lease?.key ?? null,
    lease?.leaseId ?? null,
    leaseTable,
  ];
  return { params, key, lease };
}

/** Validates a claim; its parameters for the decision (no key, no lease). */
export function claimParams(
  scope: unknown,
  token: unknown,
  policy: '>=' | '>',
  leaseTable: string,
): (string | null)[] {
  const checked = [validateKey(scope, 'scope'), parseToken(token, 'token').toString()];
  return [...checked, policy, null, null, null, leaseTable];
}
