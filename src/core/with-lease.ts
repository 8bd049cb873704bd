import type {
  AcquireOptions,
  AcquireOptionsWithoutFences,
  FencedWithLeaseResult,
  LeaseClient,
  WithLeaseResult,
} from './client.js';
import type { Lease } from './lease.js';

/**
 * Runs `fn` under a lease on `key`: acquires, renews while `fn` runs, and releases in every
 * outcome. The same as `client.withLease(key, options, fn)`.
 *
 * @example
 * const result = await withLease(client, 'tenant/42/reconcile', { ttl: '30s', wait: '10s' },
 *   async (lease, signal) => reconcile(tenant, { fence: lease.token, signal }));
 * if (result.status === 'busy') console.log('someone else is reconciling');
 */
export function withLease<T>(
  client: LeaseClient,
  key: string,
  options: AcquireOptionsWithoutFences,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
): Promise<WithLeaseResult<T>>;
export function withLease<T>(
  client: LeaseClient,
  key: string,
  options: AcquireOptions,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
): Promise<FencedWithLeaseResult<T>>;
export function withLease<T>(
  client: LeaseClient,
  key: string,
  options: AcquireOptions,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
): Promise<FencedWithLeaseResult<T>> {
  return client.withLease(key, options, fn);
}
