import { invalidArgument } from '../../core/errors.js';
import { parseToken, validateKey } from '../../core/validate.js';
import type { StoreLeaseRef } from '../../core/store.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The lease a `renew` or `release` command names, validated. */
export function leaseRefFromFlags(
  key: string,
  flags: { leaseId: string; token: string },
): StoreLeaseRef {
  if (!UUID.test(flags.leaseId))
    throw invalidArgument('lease-id', 'must be the UUID printed by acquire', flags.leaseId);
  return {
    key: validateKey(key),
    leaseId: flags.leaseId.toLowerCase(),
    token: parseToken(flags.token, 'token'),
  };
}

/** Store request options for one CLI request. */
export function cliRequest(timeoutMs = 10_000): { timeoutMs: number; signal: AbortSignal } {
  return { timeoutMs, signal: AbortSignal.timeout(timeoutMs) };
}
