import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { MAX_SET_KEYS } from '../../src/core/lease-set.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';

function setup(): { clock: ManualClock; client: (owner: string) => LeaseClient } {
  const clock = new ManualClock();
  const state = new MemoryLeaseState();
  const store = new MemoryLeaseStore({ clock, state });
  return { clock, client: (ownerId) => new LeaseClient({ store, clock, ownerId }) };
}

const invalid = async (p: Promise<unknown>): Promise<void> => {
  await assert.rejects(p, (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'));
};

describe('acquireAll (memory store, virtual time)', () => {
  it('takes every key in sorted order with a token per key, and releases them all', async () => {
    const { client } = setup();
    const a = client('a');
    const r = await a.acquireAll(['c', 'a', 'b'], { ttl: 1000, autoRenew: false });
    assert.equal(r.status, 'acquired');
    if (r.status !== 'acquired') return;
    assert.deepEqual(r.leases.keys, ['a', 'b', 'c']);
    assert.deepEqual([...r.leases.tokens.keys()], ['a', 'b', 'c']);
    for (const [key, token] of r.leases.tokens) {
      assert.equal(typeof token, 'bigint');
      assert.equal(r.leases.leases.get(key)!.token, token);
    }
    assert.equal(r.leases.isValid(), true);
    assert.deepEqual(await r.leases.release(), { status: 'released' });
    assert.equal(r.leases.status, 'released');
    assert.equal(r.leases.signal.aborted, true);
    assert.equal(a.heldLeases().length, 0);
    await a.close();
  });

  it('is all or none: a key held by another owner leaves nothing held, and names that key', async () => {
    const { client } = setup();
    const a = client('a');
    const b = client('b');
    const held = await b.acquire('k2', { ttl: 5000, autoRenew: false });
    assert.equal(held.status, 'acquired');
    const r = await a.acquireAll(['k3', 'k1', 'k2'], { ttl: 1000, autoRenew: false });
    assert.equal(r.status, 'busy');
    if (r.status !== 'busy') return;
    assert.equal(r.key, 'k2');
    assert.equal(r.holder.ownerId, 'b');
    assert.equal(a.heldLeases().length, 0, 'k1 was released again');
    assert.equal((await a.inspect('k1')).holder, undefined);
    assert.equal((await a.inspect('k3')).lastToken, 0n, 'k3 was never asked for');
    await a.close();
    await b.close();
  });

  it('one deadline for the set: times out naming the blocking key, then succeeds once it frees', async () => {
    const { clock, client } = setup();
    const a = client('a');
    const b = client('b');
    const held = await b.acquire('y', { ttl: 5000, autoRenew: false });
    assert.equal(held.status, 'acquired');
    const pending = a.acquireAll(['x', 'y'], { ttl: 10_000, wait: 2000, autoRenew: false });
    await clock.advance(2500);
    const r = await pending;
    assert.equal(r.status, 'timeout');
    if (r.status !== 'timeout') return;
    assert.equal(r.key, 'y');
    assert.ok(r.waitedMs >= 2000);
    assert.equal(a.heldLeases().length, 0);
    const later = a.acquireAll(['x', 'y'], { ttl: 10_000, wait: 5000, autoRenew: false });
    await clock.advance(100);
    if (held.status === 'acquired') await held.lease.release();
    await clock.advance(300);
    const ok = await later;
    assert.equal(ok.status, 'acquired');
    await a.close();
    await b.close();
  });

  it('losing one member loses the set: its signal fires and the others are released', async () => {
    const { clock, client } = setup();
    const a = client('a');
    const r = await a.acquireAll(['p', 'q'], { ttl: 1000, autoRenew: false });
    assert.equal(r.status, 'acquired');
    if (r.status !== 'acquired') return;
    await r.leases.leases.get('q')!.renew(); // q's deadline now later than p's
    await clock.advance(1200);
    assert.equal(r.leases.isValid(), false);
    assert.equal(r.leases.signal.aborted, true);
    assert.equal(r.leases.status, 'lost');
    assert.equal(r.leases.lostKey?.key, 'p');
    // The set released q on its own: another owner can take it at once, long before q expires.
    const b = client('b');
    const q = await b.acquire('q', { ttl: 1000, wait: 100, autoRenew: false });
    assert.equal(q.status, 'acquired');
    assert.equal(r.leases.leases.get('q')!.status, 'released');
    await b.close();
    await a.close();
  });

  it('withLeases runs the body holding the set and releases it', async () => {
    const { client } = setup();
    const a = client('a');
    const out = await a.withLeases(['m', 'n'], { ttl: 1000 }, (set) => {
      assert.equal(a.heldLeases().length, 2);
      return [...set.tokens.values()].length;
    });
    assert.equal(out.status, 'completed');
    assert.equal(out.status === 'completed' && out.value, 2);
    assert.equal(a.heldLeases().length, 0);
    await a.close();
  });

  it('refuses bad sets before anything is sent', async () => {
    const { client } = setup();
    const a = client('a');
    await invalid(a.acquireAll([], { ttl: 1000 }));
    await invalid(a.acquireAll(['a', 'b', 'a'], { ttl: 1000 }));
    const many = Array.from({ length: MAX_SET_KEYS + 1 }, (_, i) => `k${i}`);
    await invalid(a.acquireAll(many, { ttl: 1000 }));
    await invalid(a.acquireAll(['ok', 'sem#slot=0'], { ttl: 1000 }));
    await invalid(a.acquireAll('ab' as unknown as string[], { ttl: 1000 }));
    await invalid(a.acquireAll(['a'], { ttl: 1 }));
    assert.equal(a.heldLeases().length, 0);
    await a.close();
  });
});
