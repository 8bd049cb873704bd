import assert from 'node:assert/strict';
import { LeaseClient, type LeaseClientOptions } from '../../core/client.js';
import type { Lease } from '../../core/lease.js';
import type { AcquireResult } from '../../core/results.js';
import {
  type LeaseStore,
  type StoreAcquireRequest,
  isQueueingLeaseStore,
  type StoreQueuedOptions,
  type StoreRequestOptions,
} from '../../core/store.js';
import type { StoreHarness } from './harness.js';

// The helpers every case of the store contract shares.
/**
 * A short TTL for cases that wait for expiry: `ms`, or the store's minimum TTL when that is
 * longer (etcd TTLs are whole seconds). Cases scale their waits by the same factor.
 */
export function shortTtl(store: LeaseStore, ms: number): number {
  return Math.max(ms, store.capabilities.minTtlMs);
}

export const OPTS = (): StoreRequestOptions => ({
  timeoutMs: 5000,
  signal: new AbortController().signal,
});

/** Opens `n` stores over the harness, runs `fn`, and always closes them. */
export async function withStores<T>(
  h: StoreHarness,
  n: number,
  fn: (stores: LeaseStore[]) => Promise<T>,
): Promise<T> {
  const stores: LeaseStore[] = [];
  try {
    for (let i = 0; i < n; i++) stores.push(await h.open());
    return await fn(stores);
  } finally {
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
  }
}

export function client(
  store: LeaseStore,
  ownerId: string,
  extra: Partial<LeaseClientOptions> = {},
): LeaseClient {
  return new LeaseClient({ store, ownerId, ...extra });
}

export function leaseOf(r: AcquireResult, what = 'acquire'): Lease {
  assert.equal(
    r.status,
    'acquired',
    `${what} should be acquired, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  return r.lease;
}

export function busyOf(r: AcquireResult): Extract<AcquireResult, { status: 'busy' }> {
  assert.equal(
    r.status,
    'busy',
    `expected busy, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  return r;
}

/** Every lease a case made must be ended and no renewal may be left running. */
export async function closeAll(...clients: LeaseClient[]): Promise<void> {
  for (const c of clients) {
    assert.equal(
      c.heldLeases().length,
      0,
      `client ${c.ownerId} still holds leases at the end of the case`,
    );
    await c.close();
  }
}

/**
 * A transparent wrapper over a real store that counts the calls a client makes. Every call
 * runs on the store itself (a store may keep state, like a subscriber, on `this`).
 */
export function countCalls(store: LeaseStore): {
  store: LeaseStore;
  calls: { tryAcquire: number; release: number; releaseAndAcquire: number };
} {
  const calls = { tryAcquire: 0, release: 0, releaseAndAcquire: 0 };
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...a: unknown[]) => unknown;
      if (typeof prop === 'string' && prop in calls) {
        return (...args: unknown[]): unknown => {
          calls[prop as keyof typeof calls]++;
          return fn.apply(target, args);
        };
      }
      return fn.bind(target);
    },
  });
  return { store: wrapped, calls };
}

/**
 * A transparent wrapper over a real store that lets a case see when a waiter is parked:
 * by the client's loop (subscribed, then told busy again), or in the store's own queue.
 */
export function observed(store: LeaseStore): {
  store: LeaseStore;
  busyAnswers: () => number;
  watches: () => number;
  /** Times a waiter was parked in the store's own queue (`acquireQueued`'s `onParked`). */
  queuedParks: () => number;
} {
  let busy = 0;
  let watches = 0;
  let queued = 0;
  const wrapped: LeaseStore = Object.create(store) as LeaseStore;
  Object.assign(wrapped, {
    tryAcquire: async (req: StoreAcquireRequest, o: StoreRequestOptions) => {
      const r = await store.tryAcquire(req, o);
      if (r.status === 'busy') busy++;
      return r;
    },
    watch: async (key: string, fn: () => void) => {
      const u = await store.watch(key, fn);
      watches++;
      return u;
    },
  });
  if (isQueueingLeaseStore(store)) {
    Object.assign(wrapped, {
      acquireQueued: (req: StoreAcquireRequest, o: StoreQueuedOptions) =>
        store.acquireQueued(req, {
          ...o,
          onParked: () => {
            queued++;
            o.onParked?.();
          },
        }),
    });
  }
  return {
    store: wrapped,
    busyAnswers: () => busy,
    watches: () => watches,
    queuedParks: () => queued,
  };
}
