import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
  WatchOptions,
} from '../../src/core/store.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';

/** A memory store that counts the server's subscriptions and acquire attempts. */
class CountingStore extends ForwardingLeaseStore {
  watches = 0;
  /** Acquire attempts that reached the store, by owner. */
  readonly attempts = new Map<string, number>();

  constructor() {
    super(new MemoryLeaseStore());
  }

  override tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.attempts.set(request.ownerId, (this.attempts.get(request.ownerId) ?? 0) + 1);
    return super.tryAcquire(request, options);
  }

  override watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch> {
    this.watches++;
    return super.watch(key, onChange, options);
  }
}

interface Granted {
  readonly leaseId: string;
  readonly token: string;
}

async function post(url: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, `${path} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** The server's `leasehold_acquire_waiting` gauge. */
async function waitingNow(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /^leasehold_acquire_waiting(?:\{[^}]*\})? (\d+)/m.exec(text);
  return m === null ? Number.NaN : Number(m[1]);
}

describe('server: requests waiting for one key', () => {
  let server: TestServer | undefined;
  after(async () => {
    await server?.close();
  });

  it('share one store subscription, and each release lets exactly one of them in', async () => {
    const store = new CountingStore();
    server = await startTestServer({ store });
    const { url } = server;
    const key = uniqueKey('wait-queue');
    const first = (await post(url, '/v1/acquire', {
      key,
      ttl: '30s',
      ownerId: 'holder',
    })) as unknown as Granted;
    const order: string[] = [];
    const waiters = ['w1', 'w2', 'w3', 'w4'].map(async (ownerId, i) => {
      // Arrive one after another, so that the order of the queue is known: a waiter starts
      // once the ones before it are parked in the server's queue.
      await eventually(
        `${i} waiting`,
        async () => ((await waitingNow(url)) >= i ? true : undefined),
        { timeoutMs: 30_000 },
      );
      const granted = (await post(url, '/v1/acquire', {
        key,
        ttl: '30s',
        wait: '60s',
        ownerId,
      })) as unknown as Granted;
      order.push(ownerId);
      return { ownerId, ...granted };
    });
    await eventually(
      'all four waiting',
      async () => ((await waitingNow(url)) >= 4 ? true : undefined),
      { timeoutMs: 30_000 },
    );
    // Only the first in line tried at the store (and re-checked once subscribed).
    assert.ok((store.attempts.get('w1') ?? 0) >= 2);
    for (const w of ['w2', 'w3', 'w4']) assert.equal(store.attempts.get(w) ?? 0, 0, w);
    assert.equal(store.watches, 1, 'one subscription for the key, not one per request');
    let previous: Granted = first;
    const tokens: bigint[] = [BigInt(first.token)];
    for (let n = 1; n <= 4; n++) {
      await post(url, '/v1/release', { key, leaseId: previous.leaseId, token: previous.token });
      const next = await eventually(
        `grant ${n}`,
        () => (order.length >= n ? order[n - 1] : undefined),
        {
          timeoutMs: 30_000,
        },
      );
      assert.equal(order.length, n, `release ${n} let exactly one waiter in`);
      const granted = await waiters[['w1', 'w2', 'w3', 'w4'].indexOf(next)]!;
      tokens.push(BigInt(granted.token));
      previous = granted;
    }
    // Only the first in line tries at the store: they get in in the order they arrived.
    assert.deepEqual(order, ['w1', 'w2', 'w3', 'w4']);
    await Promise.all(waiters);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!);
    assert.equal(store.watches, 1);
    await post(url, '/v1/release', { key, leaseId: previous.leaseId, token: previous.token });
  });
});
