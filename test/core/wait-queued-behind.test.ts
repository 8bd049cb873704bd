import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import { WakeLines } from '../../src/core/runtime/wake-lines.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
} from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

/**
 * A memory store that wakes its watchers as the Redis and PostgreSQL stores do: one waiter
 * per release through {@link WakeLines}, which says who is queued behind another. Counts
 * grant attempts by owner.
 */
class OneWakeStore extends ForwardingLeaseStore {
  readonly attempts = new Map<string, number>();
  private readonly lines = new WakeLines('one');
  private readonly subscribed = new Set<string>();
  override tryAcquire(r: StoreAcquireRequest, o: StoreRequestOptions): Promise<StoreAcquireResult> {
    this.attempts.set(r.ownerId, (this.attempts.get(r.ownerId) ?? 0) + 1);
    return super.tryAcquire(r, o);
  }
  override async watch(key: string, onChange: (change?: WatchChange) => void): Promise<Unwatch> {
    const unwatch = this.lines.add(key, onChange);
    if (!this.subscribed.has(key)) {
      this.subscribed.add(key);
      await super.watch(key, () => this.lines.released(key));
    }
    return unwatch;
  }
}

describe('waiting behind another waiter of the same store', () => {
  it("only the store's first waiter polls; the others are woken in turn", async () => {
    const clock = new ManualClock();
    const state = new MemoryLeaseState();
    const store = new OneWakeStore(new MemoryLeaseStore({ clock, state }));
    const holder = new LeaseClient({ store, clock, ownerId: 'holder' });
    const h = await holder.acquire('k', { ttl: 5_000, autoRenew: false });
    assert.equal(h.status, 'acquired');
    const names = ['w1', 'w2', 'w3'];
    const clients = names.map(
      (ownerId) => new LeaseClient({ store, clock, ownerId, pollInterval: 100 }),
    );
    const order: string[] = [];
    const waits = clients.map(async (c, i) => {
      const r = await c.acquire('k', { ttl: 5_000, wait: 60_000, autoRenew: false });
      assert.equal(r.status, 'acquired');
      order.push(names[i]!);
      await (r as { lease: Lease }).lease.release();
    });
    await clock.advance(1);
    const parked = names.map((n) => store.attempts.get(n) ?? 0);
    assert.deepEqual(parked, [2, 2, 2], 'each tried, subscribed, and tried once more');
    await clock.advance(4_000);
    const polled = names.map((n) => (store.attempts.get(n) ?? 0) - parked[names.indexOf(n)]!);
    assert.ok(polled[0]! >= 20, `the first waiter polled (${polled[0]} polls in 4 s at 100 ms)`);
    assert.deepEqual(polled.slice(1), [0, 0], 'the waiters behind it asked the store nothing');
    await (h as { lease: Lease }).lease.release();
    await Promise.all(waits);
    assert.deepEqual(order, names, 'served in the order they came');
    for (const c of [...clients, holder]) await c.close();
  });
});
