import { randomUUID } from 'node:crypto';
import { LeaseClient } from '../src/core/client.js';
import {
  isQueueingLeaseStore,
  type LeaseStore,
  type StoreAcquireRequest,
  type StoreQueuedOptions,
  type StoreRequestOptions,
} from '../src/core/store.js';
import { percentile, type BenchResult } from './lib.js';

/**
 * Parks a waiter (subscribed and told busy, or queued at a store that keeps the queue),
 * releases, and times until the waiter holds.
 */
export async function inProcessHandoff(
  suite: string,
  subject: string,
  open: () => LeaseStore,
  rounds: number,
  label: { scenario?: string; notes?: string } = {},
): Promise<BenchResult> {
  const holderStore = open();
  const waiterInner = open();
  let busy = 0;
  let parked: (() => void) | undefined;
  const waiterStore: LeaseStore = Object.assign(Object.create(waiterInner) as LeaseStore, {
    tryAcquire: async (r: StoreAcquireRequest, o: StoreRequestOptions) => {
      const a = await waiterInner.tryAcquire(r, o);
      if (a.status === 'busy' && ++busy === 2) parked?.();
      return a;
    },
    watch: (k: string, fn: () => void) => waiterInner.watch(k, fn),
  });
  if (isQueueingLeaseStore(waiterInner)) {
    Object.assign(waiterStore, {
      acquireQueued: (r: StoreAcquireRequest, o: StoreQueuedOptions) =>
        waiterInner.acquireQueued(r, { ...o, onParked: () => parked?.() }),
    });
  }
  const holder = new LeaseClient({ store: holderStore, ownerId: 'holder' });
  const waiter = new LeaseClient({ store: waiterStore, ownerId: 'waiter', pollInterval: 60_000 });
  const key = `bench/handoff/${randomUUID()}`;
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const h = await holder.acquire(key, { ttl: 30_000, wait: 20_000 });
    if (h.status !== 'acquired') throw new Error('holder could not acquire');
    busy = 0;
    const isParked = new Promise<void>((r) => (parked = r));
    const waiting = waiter.acquire(key, { ttl: 30_000, wait: 20_000 });
    const early = await Promise.race([isParked.then(() => undefined), waiting]);
    if (early !== undefined)
      throw new Error(
        `handoff round ${i}: waiter finished before parking: ${early.status} ${early.status === 'unavailable' ? String(early.cause) : ''}`,
      );
    const t0 = performance.now();
    await h.lease.release();
    const w = await waiting;
    samples.push(performance.now() - t0);
    if (w.status !== 'acquired') throw new Error('waiter did not acquire');
    await w.lease.release();
  }
  await holder.close();
  await waiter.close();
  await holderStore.close();
  await waiterInner.close();
  return {
    suite,
    subject,
    scenario: label.scenario ?? 'handoff in one process',
    workers: 2,
    keys: 'hot',
    p50Ms: percentile(samples, 50),
    p99Ms: percentile(samples, 99),
    notes: label.notes ?? `${rounds} handoffs, release sent → waiter holds`,
  };
}
