import { canHandOff, type StoreLeaseRef, type StoreReleaseResult } from '../core/store.js';
import type { ServerContext } from './context.js';

/**
 * Hand-offs in a row on one key through this server; then one ordinary release lets the
 * waiters of other servers and of clients on the store itself compete (as the client's
 * `maxHandOffRun`, whose default this is).
 */
export const MAX_HAND_OFF_RUN = 16;

/** What a release did, and, when it handed the key on, how to tell the waiter. */
export interface ServerRelease {
  readonly status: StoreReleaseResult['status'];
  /** Wakes the waiter the key went to (or that must try again); call after publishing. */
  readonly wake?: () => void;
}

/**
 * Releases `lease` at the store. When requests wait for its key in this server and the store
 * can release and acquire in one atomic step ({@link canHandOff}), the release also tries
 * to grant the key to the first of them, with that waiter's own request: one store round
 * trip per change of holder instead of a release, a notification, a wake-up and a re-check
 * (and, on SQLite, one commit instead of two). The grant obeys every rule of an acquire; it
 * is exactly what the waiter's own try right after the release would have got, with nothing
 * in between. A waiter that gave up meanwhile has the grant released (`Waiter.deliver`).
 * Throws what the store throws; the claimed waiter is then woken to try for itself.
 */
export async function releaseThroughServer(
  ctx: ServerContext,
  lease: StoreLeaseRef,
): Promise<ServerRelease> {
  const { store, metrics } = ctx;
  const queue = canHandOff(store) ? ctx.waiting.get(lease.key) : undefined;
  const head = queue?.claimHead(MAX_HAND_OFF_RUN);
  const started = performance.now();
  if (queue === undefined || head === undefined || !canHandOff(store)) {
    try {
      const answer = await store.release(lease, ctx.storeOptions);
      metrics.storeRequestDone('release', true, started);
      return { status: answer.status };
    } catch (err) {
      metrics.storeRequestDone('release', false, started);
      throw err;
    }
  }
  const request = head.request.storeRequest;
  let answer;
  try {
    answer = await store.releaseAndAcquire(lease, request, ctx.storeOptions);
  } catch (err) {
    metrics.storeRequestDone('release_and_acquire', false, started);
    queue.unclaim(head);
    head.wakeup.notify();
    throw err;
  }
  metrics.storeRequestDone('release_and_acquire', true, started);
  const granted = answer.acquired;
  if (granted.status !== 'acquired') {
    queue.unclaim(head);
    return { status: answer.released, wake: () => head.deliver(undefined) };
  }
  const grant = { ...granted, sentAt: started };
  const ref = { key: request.key, leaseId: request.leaseId, token: granted.token };
  return {
    status: answer.released,
    wake: () =>
      head.deliver({
        grant,
        // The waiter left before it could answer: nobody will renew or release this grant.
        release: () => store.release(ref, ctx.storeOptions).catch(() => undefined),
      }),
  };
}
