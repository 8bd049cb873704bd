import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Clock } from '../../src/core/runtime/clock.js';
import { LeaseClient } from '../../src/core/client.js';
import { LeaseholdError } from '../../src/core/errors.js';
import type { LeaseEvent } from '../../src/core/events.js';
import type { Lease } from '../../src/core/lease.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type { StoreRenewResult } from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { deferred, FaultyStore } from '../support/faulty-store.js';

// ttl 1000 ms with the default drift allowance (1% + 2 ms) gives a local deadline 988 ms
// after the acquire request was sent.
const TTL = 1000;
const DEADLINE = 988;

function setup(): {
  clock: ManualClock;
  state: MemoryLeaseState;
  store: FaultyStore;
  client: LeaseClient;
  events: LeaseEvent[];
} {
  const clock = new ManualClock();
  const state = new MemoryLeaseState();
  const store = new FaultyStore(new MemoryLeaseStore({ clock, state }));
  const client = new LeaseClient({ store, clock, ownerId: 'worker-a' });
  const events: LeaseEvent[] = [];
  client.on('*', (e) => events.push(e));
  return { clock, state, store, client, events };
}

async function acquire(client: LeaseClient, renewEvery = 300): Promise<Lease> {
  const r = await client.acquire('job/1', { ttl: TTL, renewEvery });
  assert.equal(r.status, 'acquired');
  return (r as { lease: Lease }).lease;
}

describe('Lease renewal in virtual time', () => {
  it('renews in the background below the TTL and keeps the lease past several TTLs', async () => {
    const { clock, client, store } = setup();
    const lease = await acquire(client);
    await clock.advance(5 * TTL);
    assert.equal(lease.status, 'held');
    assert.ok(store.calls.renew >= 15, `expected about 16 renewals, saw ${store.calls.renew}`);
    assert.ok(lease.deadline > 5 * TTL, 'the deadline moved with each renewal');
    await lease.release();
    assert.equal(clock.pendingTimers(), 0, 'no timer left after release');
  });

  it('fires the signal the moment the store answers lost, before the local deadline', async () => {
    const { clock, state, client, events } = setup();
    const lease = await acquire(client);
    // An operator clears the lock behind the holder's back.
    state.rows.get('job/1')!.leaseId = undefined;
    await clock.advance(300);
    assert.equal(lease.signal.aborted, true);
    assert.equal(lease.status, 'lost');
    assert.equal(lease.lossReason, 'lost');
    assert.ok(clock.now() < DEADLINE);
    assert.ok(events.some((e) => e.type === 'lost'));
    assert.equal(clock.pendingTimers(), 0, 'no timer left after loss');
  });

  it('fires the signal at the local deadline while a renewal hangs, and a late "renewed" answer does not resurrect the lease', async () => {
    const { clock, store, client } = setup();
    const reply = deferred<StoreRenewResult>();
    let sent = 0;
    store.onRenew = async (_req, _o, forward) => {
      sent++;
      const real = await forward(); // the store did renew …
      reply.resolve(real);
      return new Promise<StoreRenewResult>(() => {}); // … but the answer never arrives in time
    };
    const lease = await acquire(client);
    await clock.advance(DEADLINE - 1);
    assert.ok(sent >= 1, 'renewals were sent; none was answered');
    assert.equal(lease.signal.aborted, false, 'still valid 1 ms before the deadline');
    await clock.advance(1);
    assert.equal(
      lease.signal.aborted,
      true,
      'the signal fires at the deadline even with a renewal pending',
    );
    assert.equal(lease.lossReason, 'expired');
    assert.equal((await reply.promise).status, 'renewed', 'the store had in fact renewed');
    store.onRenew = (_r, _o, forward) => forward();
    assert.equal((await lease.renew()).status, 'lost', 'lost stays lost');
    assert.equal(lease.isValid(), false);
    assert.throws(() => lease.assertValid(), /no longer valid/);
    assert.equal(clock.pendingTimers(), 0);
    await lease.release();
  });

  it('retries a renewal whose reply was lost, in time, and keeps the lease', async () => {
    const { clock, store, client, events } = setup();
    let dropped = 0;
    store.onRenew = async (_r, _o, forward) => {
      const real = await forward(); // the store renews …
      if (dropped++ === 0) return new Promise<StoreRenewResult>(() => {}); // … the first reply is lost
      return real;
    };
    const lease = await acquire(client);
    await clock.advance(3 * TTL);
    assert.equal(lease.status, 'held', 'one lost reply must not cost the lease');
    assert.ok(events.some((e) => e.type === 'renew_failed'));
    assert.ok(lease.deadline > 3 * TTL - 12);
    await lease.release();
    assert.equal(clock.pendingTimers(), 0);
  });

  it('ignores a "renewed" answer that arrives after the lease was given up', async () => {
    const { clock, store, client } = setup();
    const held = deferred<StoreRenewResult>();
    store.onRenew = () => held.promise;
    const lease = await acquire(client);
    await clock.advance(DEADLINE);
    assert.equal(lease.status, 'lost');
    held.resolve({ status: 'renewed' });
    await clock.advance(10);
    assert.equal(lease.status, 'lost');
    assert.equal(lease.remainingMs(), 0);
  });

  it('retries failed renewals until the deadline and keeps the lease when one succeeds', async () => {
    const { clock, store, client, events } = setup();
    let failures = 2;
    store.onRenew = (_r, _o, forward) =>
      failures-- > 0 ? Promise.reject(new Error('ECONNRESET')) : forward();
    const lease = await acquire(client);
    await clock.advance(600);
    assert.equal(lease.status, 'held');
    assert.equal(events.filter((e) => e.type === 'renew_failed').length, 2);
    assert.ok(events.some((e) => e.type === 'renewed'));
    assert.ok(lease.deadline > DEADLINE);
    await lease.release();
    assert.equal(clock.pendingTimers(), 0);
  });

  it('treats a renewal still failing at the deadline as loss, every request bounded by the time left', async () => {
    const { clock, store, client } = setup();
    const timeouts: number[] = [];
    store.onRenew = (_r, o) => {
      timeouts.push(o.timeoutMs);
      return Promise.reject(new Error('ETIMEDOUT'));
    };
    const lease = await acquire(client);
    await clock.advance(DEADLINE);
    assert.equal(lease.status, 'lost');
    assert.equal(lease.lossReason, 'expired');
    assert.ok(timeouts.length >= 2);
    let t = 300;
    for (const timeout of timeouts) {
      assert.ok(
        timeout <= DEADLINE - t + 1,
        `a renewal sent near ${t}ms had timeout ${timeout}ms, past the deadline`,
      );
      t += 100;
    }
    assert.equal(clock.pendingTimers(), 0);
  });

  it('fails closed when the monotonic clock goes backwards', async () => {
    const clock = new ManualClock();
    let offset = 0;
    const stepping: Clock = {
      now: () => clock.now() + offset,
      wallNow: () => clock.wallNow(),
      setTimeout: (cb, ms) => clock.setTimeout(cb, ms),
      clearTimeout: (h) => clock.clearTimeout(h),
    };
    const client = new LeaseClient({ store: new MemoryLeaseStore({ clock }), clock: stepping });
    const lease = await acquire(client);
    await clock.advance(100);
    assert.equal(lease.isValid(), true);
    offset = -60; // the injected monotonic clock steps back 60 ms
    assert.equal(lease.isValid(), false, 'a clock that goes backwards ends the lease');
    assert.equal(lease.lossReason, 'clock');
    assert.equal(lease.signal.aborted, true);
    await assert.rejects(client.acquire('job/2', { ttl: TTL }), /went backwards/);
    await client.close();
    assert.equal(clock.pendingTimers(), 0);
  });

  it('never keeps a renewal timer running after release, loss or client close', async () => {
    const { clock, client } = setup();
    const a = await acquire(client);
    const r = await client.acquire('job/2', { ttl: TTL });
    assert.equal(r.status, 'acquired');
    assert.ok(clock.pendingTimers() > 0);
    await a.release();
    await client.close();
    assert.equal(clock.pendingTimers(), 0);
    assert.equal(client.heldLeases().length, 0);
    await assert.rejects(client.acquire('job/3', { ttl: TTL }), /closed/);
  });
});

describe('background renewal failures', () => {
  it('never leaks an unhandled rejection: a store that throws a protocol error ends the lease', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown): void => {
      unhandled.push(err);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const { clock, store, client } = setup();
      store.onRenew = () =>
        Promise.reject(new LeaseholdError('ERR_PROTOCOL', 'store answered nonsense'));
      const lease = await acquire(client);
      await clock.advance(400);
      await new Promise((r) => setImmediate(r));
      assert.equal(lease.status, 'lost');
      assert.equal(lease.signal.aborted, true);
      assert.deepEqual(unhandled, []);
      assert.equal(clock.pendingTimers(), 0);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
