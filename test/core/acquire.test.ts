import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/lease.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type { StoreAcquireResult } from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { deferred, FaultyStore } from '../support/faulty-store.js';

function setup(): {
  clock: ManualClock;
  state: MemoryLeaseState;
  store: FaultyStore;
  client: LeaseClient;
} {
  const clock = new ManualClock();
  const state = new MemoryLeaseState();
  const store = new FaultyStore(new MemoryLeaseStore({ clock, state }));
  return { clock, state, store, client: new LeaseClient({ store, clock, ownerId: 'a' }) };
}

describe('LeaseClient.acquire', () => {
  it('measures the deadline from before the request was sent, so a slow answer shortens it', async () => {
    const { clock, store, client } = setup();
    store.onAcquire = async (_r, _o, forward) => {
      const answer = await forward();
      await clock.advance(0); // let the test move time while the answer travels back
      return answer;
    };
    const gate = deferred<void>();
    const inner = store.onAcquire;
    store.onAcquire = async (r, o, forward) => {
      await gate.promise;
      return inner(r, o, forward);
    };
    const pending = client.acquire('k', { ttl: 1000 });
    await clock.advance(400); // the request takes 400 ms
    gate.resolve();
    const r = await pending;
    assert.equal(r.status, 'acquired');
    const lease = (r as { lease: Lease }).lease;
    assert.equal(lease.deadline, 988, 'deadline = send time + ttl − drift, not receipt time + ttl');
    assert.ok(Math.abs(lease.remainingMs() - 588) < 1e-9);
    await lease.release();
  });

  it('answers unavailable when the store does not answer in time, and releases the grant that arrives later', async () => {
    const { clock, state, store, client } = setup();
    const late = deferred<void>();
    store.onAcquire = async (_r, _o, forward) => {
      await late.promise;
      return forward();
    };
    const pending = client.acquire('ghost', { ttl: 1000 });
    await clock.advance(1000);
    const r = await pending;
    assert.equal(r.status, 'unavailable');
    late.resolve();
    await clock.advance(1);
    const row = state.rows.get('ghost');
    assert.equal(row?.lastToken, 1n, 'the late request was granted at the store');
    assert.equal(row?.leaseId, undefined, 'and released by the client right after');
  });

  it('releases a grant whose answer arrives after the caller aborted (no ghost lock)', async () => {
    const { clock, state, store, client } = setup();
    const answer = deferred<StoreAcquireResult>();
    store.onAcquire = async (_r, _o, forward) => {
      const real = await forward();
      answer.resolve(real);
      return new Promise<StoreAcquireResult>((resolve) => setTimeout(() => resolve(real), 5));
    };
    const controller = new AbortController();
    const pending = client.acquire('ghost2', { ttl: 5000, signal: controller.signal });
    await answer.promise;
    controller.abort();
    await assert.rejects(pending, (e: unknown) => isLeaseholdError(e, 'ERR_ABORTED'));
    await new Promise((r) => setTimeout(r, 20));
    await clock.advance(1);
    assert.equal(state.rows.get('ghost2')?.leaseId, undefined, 'the ghost grant was released');
  });

  it('turns a thrown store error into unavailable, never busy', async () => {
    const { store, client } = setup();
    store.onAcquire = () => Promise.reject(new Error('ECONNREFUSED'));
    const r = await client.acquire('k', { ttl: 1000, wait: 5000 });
    assert.equal(r.status, 'unavailable');
    assert.match(String((r as { cause: unknown }).cause), /ECONNREFUSED/);
  });

  it('wakes a waiter at the holder expiry without any notification', async () => {
    const { clock, client, state } = setup();
    const holder = new LeaseClient({
      store: new MemoryLeaseStore({ clock, state }),
      clock,
      ownerId: 'holder',
    });
    const h = await holder.acquire('k', { ttl: 1000, autoRenew: false });
    assert.equal(h.status, 'acquired');
    let settled = false;
    const pending = client
      .acquire('k', { ttl: 1000, wait: 10_000 })
      .finally(() => (settled = true));
    await clock.advance(999);
    assert.equal(settled, false, 'still waiting while the holder is live');
    await clock.advance(10);
    assert.equal(settled, true, 'acquired within a few ms of the expiry');
    const r = await pending;
    assert.equal(r.status, 'acquired');
    await (r as { lease: Lease }).lease.release();
    await (h as { lease: Lease }).lease.release();
  });

  it('throws ERR_CLOSED for a waiting acquire when the client closes', async () => {
    const { clock, client, state } = setup();
    const holder = new LeaseClient({
      store: new MemoryLeaseStore({ clock, state }),
      clock,
      ownerId: 'holder',
    });
    const h = await holder.acquire('k', { ttl: 5000 });
    const pending = client.acquire('k', { ttl: 1000, wait: 10_000 });
    await clock.advance(10);
    await client.close();
    await assert.rejects(pending, (e: unknown) => isLeaseholdError(e, 'ERR_CLOSED'));
    await (h as { lease: Lease }).lease.release();
    await holder.close();
  });

  it('emits typed events and survives a throwing listener', async () => {
    const { client } = setup();
    const seen: string[] = [];
    client.on('*', () => {
      throw new Error('listener bug');
    });
    client.on('*', (e) => seen.push(e.type));
    const r = await client.acquire('k', { ttl: 1000 });
    const busy = await client.acquire('k', { ttl: 1000 });
    assert.equal(busy.status, 'busy');
    await (r as { lease: Lease }).lease.release();
    assert.deepEqual(seen, ['acquired', 'busy', 'released']);
  });
});

describe('LeaseClient held leases', () => {
  it('tracks leases released in any order, and close() releases the rest at the store', async () => {
    const { state, client } = setup();
    const leases: Lease[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await client.acquire(`held/${i}`, { ttl: 10_000, autoRenew: false });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') leases.push(r.lease);
    }
    const held = (): string[] =>
      client
        .heldLeases()
        .map((l) => l.key)
        .sort();
    // First, a middle one, the last one, then one moved into a freed slot.
    await leases[2]!.release();
    await leases[5]!.release();
    await leases[0]!.release();
    assert.deepEqual(held(), ['held/1', 'held/3', 'held/4']);
    await leases[0]!.release(); // twice: no effect on the others
    assert.deepEqual(held(), ['held/1', 'held/3', 'held/4']);
    const again = await client.acquire('held/2', { ttl: 10_000, autoRenew: false });
    assert.equal(again.status, 'acquired');
    assert.deepEqual(held(), ['held/1', 'held/2', 'held/3', 'held/4']);
    await client.close();
    assert.deepEqual(held(), []);
    for (let i = 0; i < 6; i++) {
      assert.equal(state.rows.get(`held/${i}`)?.leaseId, undefined, `held/${i} released`);
    }
  });
});

describe('waiting without a thundering herd', () => {
  it('32 waiters of one client on a hot key: each handoff costs a couple of store calls, not one per waiter', async () => {
    const clock = new ManualClock();
    const state = new MemoryLeaseState();
    const store = new FaultyStore(new MemoryLeaseStore({ clock, state }));
    const holder = new LeaseClient({
      store: new MemoryLeaseStore({ clock, state }),
      clock,
      ownerId: 'holder',
    });
    const client = new LeaseClient({ store, clock, ownerId: 'pool', pollInterval: 60_000 });
    const first = await holder.acquire('hot', { ttl: 30_000 });
    assert.equal(first.status, 'acquired');
    const order: number[] = [];
    const tasks = Array.from({ length: 32 }, async (_, i) => {
      const r = await client.acquire('hot', { ttl: 30_000, wait: 50_000 });
      assert.equal(r.status, 'acquired');
      order.push(i);
      await (r as { lease: Lease }).lease.release();
    });
    await clock.advance(1);
    const parkedCalls = store.calls.acquire;
    assert.equal(
      parkedCalls,
      33,
      'each waiter tried once; once subscribed, only the head tried again',
    );
    await (first as { lease: Lease }).lease.release();
    await Promise.all(tasks);
    const perHandoff = (store.calls.acquire - parkedCalls) / 32;
    assert.ok(perHandoff <= 2.5, `a handoff cost ${perHandoff.toFixed(1)} store calls on average`);
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
      'waiters of one client are served in arrival order',
    );
    assert.equal(clock.pendingTimers(), 0);
    await client.close();
    await holder.close();
  });
});
