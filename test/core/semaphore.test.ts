import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { parseSlotKey, slotKey } from '../../src/core/slot-keys.js';
import { validateKey, validatePrefix } from '../../src/core/validate.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';

function setup(random = Math.random): {
  clock: ManualClock;
  client: (owner: string) => LeaseClient;
} {
  const clock = new ManualClock();
  const state = new MemoryLeaseState();
  const store = new MemoryLeaseStore({ clock, state });
  return { clock, client: (ownerId) => new LeaseClient({ store, clock, ownerId, random }) };
}

const invalid = (fn: () => unknown): void =>
  assert.throws(fn, (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'));

describe('slot keys', () => {
  it('a key may contain #slot= only as one well-formed slot key', () => {
    assert.equal(validateKey('jobs#slot=0'), 'jobs#slot=0');
    assert.equal(validateKey('a/b#slot=1023'), 'a/b#slot=1023');
    for (const bad of ['#slot=0', 'jobs#slot=', 'jobs#slot=01', 'jobs#slot=1024', 'jobs#slot=-1']) {
      invalid(() => validateKey(bad));
    }
    invalid(() => validateKey('a#slot=1#slot=2'));
    invalid(() => validateKey('jobs#slot=0/x'));
    // A prefix may stop inside a slot key: listing a semaphore's slots.
    assert.equal(validatePrefix('jobs#slot='), 'jobs#slot=');
    assert.deepEqual(parseSlotKey(slotKey('jobs', 7)), { name: 'jobs', slot: 7 });
    assert.equal(parseSlotKey('jobs'), undefined);
  });
});

describe('acquireSlot (memory store, virtual time)', () => {
  it('spreads callers from a random slot on, and answers busy with the slot that frees soonest', async () => {
    let r = 0;
    const draws = [0.9, 0.9, 0.9];
    const { clock, client } = setup(() => draws[r++ % draws.length]!);
    const a = client('a');
    // Start at slot floor(0.9 × 3) = 2, then 0, then 1.
    const first = await a.acquireSlot('sem', { limit: 3, ttl: 3000, autoRenew: false });
    assert.equal(first.status === 'acquired' && first.lease.slot, 2);
    await clock.advance(500);
    const second = await a.acquireSlot('sem', { limit: 3, ttl: 3000, autoRenew: false });
    assert.equal(second.status === 'acquired' && second.lease.slot, 0);
    const third = await a.acquireSlot('sem', { limit: 3, ttl: 3000, autoRenew: false });
    assert.equal(third.status === 'acquired' && third.lease.slot, 1);
    const busy = await client('b').acquireSlot('sem', { limit: 3, ttl: 1000 });
    assert.equal(busy.status, 'busy');
    if (busy.status !== 'busy') return;
    assert.equal(busy.holder.ownerId, 'a');
    assert.equal(busy.retryAfterMs, 2500, 'slot 2, granted first, frees first');
    await a.close();
  });

  it('a waiter takes the slot whose holder expires, at its expiry, under the next token', async () => {
    const { clock, client } = setup();
    const a = client('a');
    const held = await a.acquireSlot('sem', { limit: 2, ttl: 1000, autoRenew: false });
    const other = await a.acquireSlot('sem', { limit: 2, ttl: 5000, autoRenew: false });
    assert.ok(held.status === 'acquired' && other.status === 'acquired');
    const waiting = client('b').acquireSlot('sem', { limit: 2, ttl: 1000, wait: 3000 });
    await clock.advance(999);
    let done = false;
    void waiting.then(() => (done = true));
    await clock.advance(0);
    assert.equal(done, false, 'both slots still held');
    await clock.advance(2);
    await clock.advance(10);
    const got = await waiting;
    assert.equal(got.status, 'acquired');
    if (got.status !== 'acquired' || held.status !== 'acquired') return;
    assert.equal(got.lease.slot, held.lease.slot);
    assert.equal(got.lease.token, held.lease.token + 1n);
    assert.ok(got.waitedMs >= 1000 && got.waitedMs < 1100, `waited ${got.waitedMs}ms`);
    await got.lease.release();
  });

  it('withSlot releases the slot in every outcome', async () => {
    const { client } = setup();
    const a = client('a');
    const r = await a.withSlot('sem', { limit: 1, ttl: 1000 }, (lease) => lease.slot);
    assert.deepEqual(r, { status: 'completed', value: 0, token: 1n });
    await assert.rejects(
      a.withSlot('sem', { limit: 1, ttl: 1000 }, () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    const again = await a.acquireSlot('sem', { limit: 1, ttl: 1000 });
    assert.equal(again.status === 'acquired' && again.lease.token, 3n);
    assert.equal(a.heldLeases().length, 1);
    await a.close();
  });

  it('refuses bad arguments before sending anything', async () => {
    const { client } = setup();
    const a = client('a');
    const rejects = (p: Promise<unknown>): Promise<void> =>
      assert.rejects(p, (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'));
    await rejects(a.acquireSlot('sem', { ttl: 1000 } as never));
    await rejects(a.acquireSlot('sem', { limit: 2.5, ttl: 1000 }));
    await rejects(a.acquireSlot('x'.repeat(1020), { limit: 2, ttl: 1000 }));
    await rejects(a.acquire(slotKey('sem', 0), { ttl: 1000 }));
    const fence = { claim: () => ({ status: 'applied' as const }) };
    await rejects(a.acquireSlot('sem', { limit: 2, ttl: 1000, fences: [{ fence, scope: 's' }] }));
    assert.equal(a.heldLeases().length, 0);
    await a.close();
  });
});
