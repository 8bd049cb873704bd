import type { LeaseContext } from './lease-grant.js';
import { boundedRequest, isProgrammerError } from './runtime/request.js';
import type { ReleaseResult } from './results.js';
import type { StoreLeaseRef } from './store.js';

/**
 * Releases a lease at the store under the client's request timeout. A store that fails or does
 * not answer in time makes the release `unavailable` (the lease then ends by its expiry at the
 * store); only a programmer error is thrown.
 */
export async function releaseAtStore(
  ctx: Pick<LeaseContext, 'store' | 'timeouts' | 'requestTimeoutMs'>,
  request: StoreLeaseRef,
): Promise<ReleaseResult> {
  const { store, timeouts, requestTimeoutMs } = ctx;
  const settled = await boundedRequest(timeouts, requestTimeoutMs, undefined, (o) =>
    store.release(request, o),
  );
  if (settled.ok) return settled.value;
  if (isProgrammerError(settled.error)) throw settled.error;
  return { status: 'unavailable', cause: settled.error };
}
