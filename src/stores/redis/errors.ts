import { isLeaseholdError, LeaseholdError } from '../../core/errors.js';
import { networkCause } from '../../core/runtime/network-errors.js';

/**
 * A failed Redis operation as the store reports it: `ERR_PROTOCOL` for a reply the store
 * could not read (a TypeError while decoding it), `ERR_UNAVAILABLE` for anything else the
 * driver threw (the client answers `unavailable`); a `LeaseholdError` passes through unchanged.
 */
export function storeError(err: unknown, op: string): LeaseholdError {
  if (isLeaseholdError(err)) return err;
  if (err instanceof TypeError) {
    return new LeaseholdError('ERR_PROTOCOL', `Redis ${op}: ${err.message}`, { cause: err });
  }
  return new LeaseholdError('ERR_UNAVAILABLE', `Redis ${op} failed: ${String(err)}`, {
    cause: err,
  });
}

/**
 * The client's connection failed before anything was sent. A host name that cannot be
 * resolved is said in words, naming the host.
 */
export function unreachableError(err: unknown): LeaseholdError {
  const message = err instanceof Error ? err.message : String(err);
  const cause = networkCause(err);
  const why =
    cause !== undefined && /^E(NOTFOUND|AI_)/.test(cause.code)
      ? `${cause.words} (${message})`
      : message;
  return new LeaseholdError('ERR_UNAVAILABLE', `Redis is not reachable: ${why}`, { cause: err });
}

/** The caller's signal fired while the store waited for the connection. */
export function abortedError(signal: AbortSignal | undefined): LeaseholdError {
  return new LeaseholdError('ERR_ABORTED', 'the operation was aborted', { cause: signal?.reason });
}

/** The store was closed before or while the request ran. */
export function closedError(): LeaseholdError {
  return new LeaseholdError('ERR_CLOSED', 'the Redis lease store was closed');
}

/** Fewer replicas than asked acknowledged a grant (option `replicas`). */
export function replicationError(
  acked: number,
  replicas: number,
  timeoutMs: number,
): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `only ${Math.max(0, acked)} of ${replicas} replicas acknowledged the grant within ${timeoutMs}ms`,
  );
}
