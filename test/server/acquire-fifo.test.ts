import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { newLeaseId } from '../../src/core/ids.js';
import type { StoreAcquireRequest, StoreQueuedResult } from '../../src/core/store.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';

const OPTS = (): { timeoutMs: number; signal: AbortSignal } => ({
  timeoutMs: 5000,
  signal: new AbortController().signal,
});

describe('server: waiters of one key through one server', () => {
  let server: TestServer | undefined;
  const stores: HttpLeaseStore[] = [];
  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await server?.close();
  });

  it('are granted in the order they arrived, each release letting in the next', async () => {
    // SQLite with group commit, as `leasehold serve` opens it.
    server = await startTestServer();
    const { url } = server;
    const key = uniqueKey('fifo');
    const holderStore = await HttpLeaseStore.connect({ url });
    stores.push(holderStore);
    const holderReq: StoreAcquireRequest = {
      key,
      leaseId: newLeaseId(),
      ownerId: 'holder',
      ttlMs: 30_000,
      value: undefined,
    };
    const held = await holderStore.tryAcquire(holderReq, OPTS());
    assert.equal(held.status, 'acquired');
    if (held.status !== 'acquired') return;

    // Each waiter is its own HTTP client. The next one is sent only once the server has
    // parked the one before (its `102 Processing`), so the arrival order is known.
    const n = 6;
    const order: number[] = [];
    const waiting: Array<Promise<{ i: number; req: StoreAcquireRequest; r: StoreQueuedResult }>> =
      [];
    for (let i = 0; i < n; i++) {
      const store = await HttpLeaseStore.connect({ url });
      stores.push(store);
      const req: StoreAcquireRequest = {
        key,
        leaseId: newLeaseId(),
        ownerId: `waiter-${i}`,
        ttlMs: 30_000,
        value: undefined,
      };
      let parked!: () => void;
      const isParked = new Promise<void>((resolve) => (parked = resolve));
      const calledAt = performance.now();
      const w = store
        .acquireQueued(req, {
          timeoutMs: 20_000,
          requestTimeoutMs: 5000,
          signal: new AbortController().signal,
          now: () => performance.now(),
          pollIntervalMs: 1000,
          onParked: () => parked(),
        })
        .then(async (r) => {
          if (r.status === 'acquired') {
            order.push(i);
            assert.ok(
              r.validFrom >= calledAt && r.validFrom <= performance.now(),
              'validFrom lies within the call',
            );
            // Let the next one in at once.
            await store.release({ key, leaseId: req.leaseId, token: r.token }, OPTS());
          }
          return { i, req, r };
        });
      waiting.push(w);
      await Promise.race([
        isParked,
        w.then(() => assert.fail(`waiter ${i} answered before it was parked`)),
      ]);
    }
    assert.equal(order.length, 0, 'nobody is granted while the holder holds the key');

    const released = await holderStore.release(
      { key, leaseId: holderReq.leaseId, token: held.token },
      OPTS(),
    );
    assert.equal(released.status, 'released');
    const results = await Promise.all(waiting);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5], 'granted in arrival order');
    let last = held.token;
    for (const { i, r } of results) {
      assert.equal(r.status, 'acquired', `waiter ${i}`);
      if (r.status !== 'acquired') continue;
      assert.ok(r.token > last, `waiter ${i}'s token ${r.token} exceeds ${last}`);
      last = r.token;
    }
  });

  it('an aborted waiter leaves the queue and the server, and is not granted', async () => {
    server ??= await startTestServer();
    const { url } = server;
    const key = uniqueKey('fifo-abort');
    const store = await HttpLeaseStore.connect({ url });
    stores.push(store);
    const holder = {
      key,
      leaseId: newLeaseId(),
      ownerId: 'holder',
      ttlMs: 30_000,
      value: undefined,
    };
    const held = await store.tryAcquire(holder, OPTS());
    assert.equal(held.status, 'acquired');
    if (held.status !== 'acquired') return;
    const ac = new AbortController();
    let parked!: () => void;
    const isParked = new Promise<void>((resolve) => (parked = resolve));
    const req = { key, leaseId: newLeaseId(), ownerId: 'quitter', ttlMs: 30_000, value: undefined };
    const w = store.acquireQueued(req, {
      timeoutMs: 20_000,
      requestTimeoutMs: 5000,
      signal: ac.signal,
      now: () => performance.now(),
      pollIntervalMs: 1000,
      onParked: () => parked(),
    });
    await isParked;
    ac.abort(new Error('caller gave up'));
    await assert.rejects(w, (err: unknown) => (err as { code?: string }).code === 'ERR_ABORTED');
    // The server saw its client leave and ended the wait (before the release below).
    await eventually('the server to cancel the wait', async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      return /^leasehold_acquisitions_total\{[^}]*result="cancelled"[^}]*\} [1-9]/m.test(text)
        ? true
        : undefined;
    });
    assert.equal(
      (await store.release({ key, leaseId: holder.leaseId, token: held.token }, OPTS())).status,
      'released',
    );
    const state = await store.inspect(key, OPTS());
    assert.equal(state.holder, undefined, 'the quitter was not granted the key');
    assert.equal(state.lastToken, held.token, 'nor granted and released again');
  });
});
