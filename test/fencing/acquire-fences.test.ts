import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { assertNever, type AcquireResult } from '../../src/core/results.js';
import { withLease } from '../../src/core/with-lease.js';
import { RedisFence } from '../../src/fencing/redis.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { tempDir } from '../support/tmp.js';

// acquire(key, { fences }) and withLease(key, { fences }, fn): the new token is claimed on
// every fence before the lease is handed over (claim before start, DESIGN §4, I9); a refusal
// or an unreachable fence releases the lease and answers claim_failed.

const tmp = tempDir('acquire-fences');
after(() => tmp.remove());
let n = 0;
const newFence = (policy: '>=' | '>' = '>='): SqliteFence =>
  new SqliteFence({ path: join(tmp.dir, `fence-${++n}.db`), policy });

function setup(options: { requestTimeout?: number } = {}): {
  state: MemoryLeaseState;
  client: LeaseClient;
} {
  const state = new MemoryLeaseState();
  const store = new MemoryLeaseStore({ state });
  return { state, client: new LeaseClient({ store, ...options }) };
}

const isFree = (state: MemoryLeaseState, key: string): boolean =>
  state.rows.get(key)?.leaseId === undefined;

/** A TCP server that accepts and never answers: a fence behind it hangs. */
async function silentServer(): Promise<{ fence: RedisFence; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  // ioredis queues commands until the (never finished) handshake: every call hangs.
  const redis = new Redis(`redis://127.0.0.1:${port}`, {
    connectTimeout: 60_000,
    maxRetriesPerRequest: null,
  });
  redis.on('error', () => undefined);
  return {
    fence: new RedisFence({ redis }),
    close: () =>
      new Promise<void>((r) => {
        redis.disconnect();
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Compiles only while an acquisition without fences cannot answer claim_failed. */
function describeWithoutFences(r: AcquireResult): string {
  switch (r.status) {
    case 'acquired':
    case 'busy':
    case 'unavailable':
      return r.status;
    default:
      return assertNever(r, 'acquire result');
  }
}

describe('acquire with fences', () => {
  it('claims the token on each fence (scope defaults to the key) before handing the lease over', async () => {
    const { client } = setup();
    const reports = newFence();
    const other = newFence('>');
    const r = await client.acquire('report/july', {
      ttl: 5000,
      fences: [{ fence: reports }, { fence: other, scope: 'mirror/july', name: 'mirror' }],
    });
    assert.equal(r.status, 'acquired');
    if (r.status !== 'acquired') return;
    const token = r.lease.token;
    assert.equal(reports.highWaterMark('report/july'), token);
    assert.equal(other.highWaterMark('mirror/july'), token);
    // Its own first write still passes under '>'.
    assert.equal(other.apply('mirror/july', token, () => null).status, 'applied');
    await r.lease.release();
    assert.equal(describeWithoutFences(await client.acquire('plain', { ttl: 5000 })), 'acquired');
    await client.close();
  });

  it('a stale fence: the lease is released and the answer names the fence, the scope and the mark', async () => {
    const { client, state } = setup();
    const first = newFence();
    const stale = newFence();
    assert.equal(stale.claim('report/july', 1000n).status, 'applied');
    const r = await client.acquire('report/july', {
      ttl: 5000,
      fences: [{ fence: first }, { fence: stale, name: 'reports-db' }],
    });
    assert.deepEqual(r, {
      status: 'claim_failed',
      fence: 1,
      name: 'reports-db',
      scope: 'report/july',
      token: 1n,
      reason: 'stale_fence',
      highWaterMark: 1000n,
    });
    assert.equal(isFree(state, 'report/july'), true, 'released at the store');
    assert.deepEqual(client.heldLeases(), []);
    await client.close();
  });

  it('an unreachable fence: claim_failed unavailable with its error, and the lease released', async () => {
    const { client, state } = setup();
    const dead = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    dead.on('error', () => undefined);
    try {
      const r = await client.acquire('k', {
        ttl: 5000,
        fences: [{ fence: newFence() }, { fence: new RedisFence({ redis: dead }) }],
      });
      assert.equal(r.status, 'claim_failed');
      if (r.status !== 'claim_failed') return;
      assert.equal(r.fence, 1);
      assert.equal(r.name, undefined);
      assert.equal(r.reason, 'unavailable');
      assert.ok(r.reason === 'unavailable' && isLeaseholdError(r.cause, 'ERR_UNAVAILABLE'));
      assert.equal(isFree(state, 'k'), true);
    } finally {
      dead.disconnect();
      await client.close();
    }
  });

  it('a fence that never answers: claim_failed unavailable after the request timeout', async () => {
    const { client, state } = setup({ requestTimeout: 300 });
    const silent = await silentServer();
    try {
      const started = performance.now();
      const r = await client.acquire('k', {
        ttl: 5000,
        fences: [{ fence: silent.fence }],
      });
      const took = performance.now() - started;
      assert.equal(r.status, 'claim_failed');
      assert.ok(r.status === 'claim_failed' && r.reason === 'unavailable');
      assert.ok(took >= 250 && took < 5000, `took ${Math.round(took)} ms`);
      assert.equal(isFree(state, 'k'), true);
    } finally {
      await silent.close();
      await client.close();
    }
  });

  it('the caller aborts while claiming: ERR_ABORTED, and the lease is released', async () => {
    const { client, state } = setup();
    const silent = await silentServer();
    try {
      const controller = new AbortController();
      const pending = client.acquire('k', {
        ttl: 5000,
        signal: controller.signal,
        fences: [{ fence: silent.fence }],
      });
      setTimeout(() => controller.abort(), 50);
      await assert.rejects(pending, (e: unknown) => isLeaseholdError(e, 'ERR_ABORTED'));
      assert.equal(isFree(state, 'k'), true);
    } finally {
      await silent.close();
      await client.close();
    }
  });

  it('refuses malformed fences before sending anything', async () => {
    const { client, state } = setup();
    const fence = newFence();
    for (const fences of [
      [],
      'x',
      [{}],
      [{ fence: {} }],
      [{ fence, scope: '' }],
      [{ fence, name: '' }],
      Array.from({ length: 17 }, () => ({ fence })),
    ]) {
      await assert.rejects(
        client.acquire('k', { ttl: 5000, fences: fences as never }),
        (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /fences/.test(e.message),
        JSON.stringify(fences).slice(0, 60),
      );
    }
    assert.equal(state.rows.get('k'), undefined, 'the store was never asked');
    await client.close();
  });

  it('after waiting for a busy key, the waiter claims its own token', async () => {
    const { client } = setup();
    const fence = newFence();
    const holder = await client.acquire('k', { ttl: 5000 });
    assert.equal(holder.status, 'acquired');
    const waiting = client.acquire('k', { ttl: 5000, wait: 5000, fences: [{ fence }] });
    if (holder.status === 'acquired') await holder.lease.release();
    const r = await waiting;
    assert.equal(r.status, 'acquired');
    if (r.status === 'acquired') assert.equal(fence.highWaterMark('k'), r.lease.token);
    await client.close();
  });

  it('withLease: fn runs only after the claims; a refusal means fn never runs', async () => {
    const { client, state } = setup();
    const fence = newFence();
    const done = await withLease(client, 'w', { ttl: 5000, fences: [{ fence }] }, (lease) => {
      assert.equal(fence.highWaterMark('w'), lease.token);
      return 'ran';
    });
    assert.equal(done.status, 'completed');
    assert.equal(fence.claim('w', 99n).status, 'applied');
    let ran = false;
    const refused = await client.withLease('w', { ttl: 5000, fences: [{ fence }] }, () => {
      ran = true;
    });
    assert.equal(refused.status, 'claim_failed');
    assert.equal(ran, false);
    assert.equal(isFree(state, 'w'), true);
    await client.close();
  });
});
