import { isLeaseholdError, LeaseholdError } from '../../core/errors.js';
import { etcd3 } from './driver.js';

const { EtcdAuthenticationFailedError, EtcdPermissionDeniedError, EtcdUserNotFoundError } = etcd3;

/**
 * How the etcd store's failures reach the client: a driver error becomes `ERR_UNAVAILABLE`
 * (the client reports `unavailable`, never `busy`); a closed store is `ERR_CLOSED`.
 */

/** etcd's answer when a put names a lease that has expired or was revoked. */
export function isLeaseNotFound(err: unknown): boolean {
  return err instanceof Error && /lease not found/i.test(err.message);
}

/**
 * The store's error mapper (`StoreErrorMapper`, core/store-folder.ts): wraps a driver error as
 * `ERR_UNAVAILABLE` (the client reports `unavailable`, never `busy`), with a hint for the
 * errors a locked-down cluster gives a misconfigured client.
 */
export function storeError(err: unknown): LeaseholdError {
  if (isLeaseholdError(err)) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new LeaseholdError('ERR_UNAVAILABLE', `etcd lease store: ${message}${hintFor(err)}`, {
    cause: err,
  });
}

function hintFor(err: unknown): string {
  if (err instanceof EtcdAuthenticationFailedError || err instanceof EtcdUserNotFoundError) {
    return ' (check the user name and password given to the store)';
  }
  if (err instanceof EtcdPermissionDeniedError) {
    return " (the etcd user's role needs readwrite on every key under the store's namespace: etcdctl role grant-permission ROLE --prefix=true readwrite NAMESPACE)";
  }
  return '';
}

/** The error every call on a closed store throws. */
export function closedError(): LeaseholdError {
  return new LeaseholdError('ERR_CLOSED', 'the etcd lease store was closed');
}
