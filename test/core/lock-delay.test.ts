import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { LeaseStore } from '../../src/core/store.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';

function setup(): { clock: ManualClock; store: MemoryLeaseStore } {
  const clock = new ManualClock();
  return { clock, store: new MemoryLeaseStore({ clock, state: new MemoryLeaseState() }) };
}

describe('lock-delay (memory store, virtual time)', () => {
  it('answers busy with the exact delay left after an expiry, and grants the moment it passes', async () => {
    const { clock, store } = setup();
    const a = new LeaseClient({ store, clock, ownerId: 'a' });
    const b = new LeaseClient({ store, clock, ownerId: 'b' });
    const stale = await a.acquire('k', { ttl: 1000, autoRenew: false, lockDelay: '5s' });
    assert.equal(stale.status, 'acquired');
    await clock.advance(1000);
    const busy = await b.acquire('k', { ttl: 1000 });
    assert.deepEqual(
      busy.status === 'busy' && { reason: busy.reason, retryAfterMs: busy.retryAfterMs },
      { reason: 'lock_delay', retryAfterMs: 5000 },
    );
    await clock.advance(4999);
    const still = await b.acquire('k', { ttl: 1000 });
    assert.equal(still.status === 'busy' && still.retryAfterMs, 1);
    await clock.advance(1);
    const got = await b.acquire('k', { ttl: 1000 });
    assert.equal(got.status === 'acquired' && got.lease.token, 2n);
    if (stale.status === 'acquired') await stale.lease.release();
    await Promise.all([a.close(), b.close()]);
  });

  it('a waiter is granted at the end of the delay, not before', async () => {
    const { clock, store } = setup();
    const a = new LeaseClient({ store, clock, ownerId: 'a' });
    const b = new LeaseClient({ store, clock, ownerId: 'b' });
    await a.acquire('k', { ttl: 1000, autoRenew: false, lockDelay: 2000 });
    const waiting = b.acquire('k', { ttl: 1000, wait: 10_000 });
    let done = false;
    void waiting.then(() => (done = true));
    await clock.advance(2999);
    assert.equal(done, false);
    for (let i = 0; i < 20 && !done; i++) await clock.advance(1);
    const got = await waiting;
    assert.equal(got.status, 'acquired');
    assert.ok(got.status === 'acquired' && got.waitedMs >= 3000 && got.waitedMs <= 3020);
    await Promise.all([a.close(), b.close()]);
  });

  it('refuses lockDelay on a store without the capability, and out of range', async () => {
    const { clock, store } = setup();
    const plain: LeaseStore = Object.create(store) as LeaseStore;
    Object.defineProperty(plain, 'capabilities', {
      value: { ...store.capabilities, lockDelay: false },
    });
    const c = new LeaseClient({ store: plain, clock });
    const invalid = (e: unknown): boolean => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT');
    await assert.rejects(c.acquire('k', { ttl: 1000, lockDelay: '1s' }), invalid);
    // 0 is no delay at all: accepted everywhere, as is ignoreLockDelay.
    const ok = await c.acquire('k', { ttl: 1000, lockDelay: 0, ignoreLockDelay: true });
    assert.equal(ok.status, 'acquired');
    const d = new LeaseClient({ store, clock });
    await assert.rejects(d.acquire('j', { ttl: 1000, lockDelay: '2h' }), invalid);
    await Promise.all([c.close(), d.close()]);
  });
});
