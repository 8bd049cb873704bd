import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { withLease } from '../../src/core/with-lease.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';

function setup(): { clock: ManualClock; state: MemoryLeaseState; client: LeaseClient } {
  const clock = new ManualClock();
  const state = new MemoryLeaseState();
  return {
    clock,
    state,
    client: new LeaseClient({ store: new MemoryLeaseStore({ clock, state }), clock }),
  };
}

const isFree = (state: MemoryLeaseState, key: string): boolean =>
  state.rows.get(key)?.leaseId === undefined;

describe('withLease', () => {
  it('releases after fn returns and reports completed with the token', async () => {
    const { state, client, clock } = setup();
    const r = await withLease(client, 'w', { ttl: 1000 }, (lease) => {
      assert.equal(isFree(state, 'w'), false);
      return `done under ${lease.token}`;
    });
    assert.deepEqual(r, { status: 'completed', value: 'done under 1', token: 1n });
    assert.equal(isFree(state, 'w'), true);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('releases when fn throws, and rethrows', async () => {
    const { state, client, clock } = setup();
    await assert.rejects(
      withLease(client, 'w', { ttl: 1000 }, () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(isFree(state, 'w'), true);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('passes the caller abort to fn and releases when fn stops for it', async () => {
    const { state, client, clock } = setup();
    const controller = new AbortController();
    const run = withLease(
      client,
      'w',
      { ttl: 1000, signal: controller.signal },
      (_lease, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => reject(new Error('stopped: aborted')));
        }),
    );
    await clock.advance(10);
    assert.equal(isFree(state, 'w'), false);
    controller.abort();
    await assert.rejects(run, /stopped: aborted/);
    assert.equal(isFree(state, 'w'), true);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('reports lost when the lease ended while fn ran', async () => {
    const { state, client, clock } = setup();
    const r = await withLease(client, 'w', { ttl: 1000 }, async (_lease, signal) => {
      state.rows.get('w')!.leaseId = undefined; // taken away behind our back
      await clock.advance(400); // the next renewal finds out
      return signal.aborted;
    });
    assert.equal(r.status, 'lost');
    assert.equal((r as { value: boolean }).value, true, 'fn saw the signal fire');
  });

  it('returns busy without running fn when the key is held', async () => {
    const { client } = setup();
    const held = await client.acquire('w', { ttl: 1000 });
    let ran = false;
    const r = await withLease(client, 'w', { ttl: 1000 }, () => {
      ran = true;
    });
    assert.equal(r.status, 'busy');
    assert.equal(ran, false);
    if (held.status === 'acquired') await held.lease.release();
  });
});

describe('long-lived caller signals', () => {
  it('an application-wide signal passed to 200 calls keeps no listener afterwards', async () => {
    const { client, state } = setup();
    const appShutdown = new AbortController();
    for (let i = 0; i < 100; i++) {
      await withLease(client, `w${i}`, { ttl: 1000, signal: appShutdown.signal }, () => i);
      const r = await client.acquire(`x${i}`, { ttl: 1000, signal: appShutdown.signal });
      if (r.status === 'acquired') await r.lease.release();
    }
    assert.ok(EventEmitter.getEventListeners(appShutdown.signal, 'abort').length <= 1);
    // 50 concurrent waiters sharing the signal still add one listener, and aborting it reaches all.
    const held = await client.acquire('shared', { ttl: 5000 });
    const waiting = Array.from({ length: 50 }, () =>
      client.acquire('shared', { ttl: 1000, wait: 60_000, signal: appShutdown.signal }),
    );
    await new Promise((r) => setImmediate(r));
    assert.ok(EventEmitter.getEventListeners(appShutdown.signal, 'abort').length <= 1);
    appShutdown.abort();
    const outcomes = await Promise.allSettled(waiting);
    assert.ok(outcomes.every((o) => o.status === 'rejected'));
    if (held.status === 'acquired') await held.lease.release();
    assert.equal(isFree(state, 'w99'), true);
  });
});
