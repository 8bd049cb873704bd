import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/lease.js';
import type {
  StoreAcquireRequest,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRequestOptions,
} from '../../src/core/store.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { deferred } from '../support/faulty-store.js';

/** A memory store that counts hand-offs and plain releases, and can hold a hand-off. */
class CountingStore extends MemoryLeaseStore {
  handOffs = 0;
  releases = 0;
  /** When set, each hand-off waits for it before reaching the store. */
  hold: Promise<void> | undefined;
  /** Resolves when a hand-off has been sent (before `hold`). */
  sent = deferred<void>();

  override async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    this.handOffs++;
    this.sent.resolve();
    if (this.hold) await this.hold;
    return super.releaseAndAcquire(release, acquire, options);
  }

  override release(
    lease: StoreLeaseRef,
    options?: StoreRequestOptions,
  ): Promise<StoreReleaseResult> {
    this.releases++;
    return super.release(lease, options);
  }
}

function leaseOf(r: Awaited<ReturnType<LeaseClient['acquire']>>): Lease {
  assert.equal(r.status, 'acquired', `expected acquired, got ${r.status}`);
  return r.lease;
}

/** Runs `n` waiters on `key` that each release as soon as they hold; returns their tokens in grant order. */
async function relay(client: LeaseClient, key: string, first: Lease, n: number): Promise<bigint[]> {
  const tokens: bigint[] = [first.token];
  const waiters = Array.from({ length: n }, async () => {
    const lease = leaseOf(await client.acquire(key, { ttl: 10_000, wait: 60_000 }));
    tokens.push(lease.token);
    await lease.release();
  });
  await first.release();
  await Promise.all(waiters);
  return tokens;
}

describe('hand-off between leases of one client', () => {
  it('passes the key to waiters in order, at most maxHandOffRun times in a row, then releases to everyone', async () => {
    const store = new CountingStore();
    const client = new LeaseClient({ store, ownerId: 'a', maxHandOffRun: 2 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    const tokens = await relay(client, 'k', first, 4);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!);
    // first→w1, w1→w2 handed; w2's release is ordinary (run of 2 reached); w3→w4 handed;
    // w4 has nobody behind it.
    assert.equal(store.handOffs, 3);
    // (MemoryLeaseStore's hand-off runs its own release: those are counted too.)
    assert.equal(store.releases - store.handOffs, 2, 'ordinary releases');
    assert.equal(client.heldLeases().length, 0);
    assert.equal(
      (await store.inspect('k', { timeoutMs: 1000, signal: new AbortController().signal })).holder,
      undefined,
    );
    await client.close();
  });

  it('maxHandOffRun 0 turns hand-off off: every release is ordinary', async () => {
    const store = new CountingStore();
    const client = new LeaseClient({ store, ownerId: 'a', maxHandOffRun: 0 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    const tokens = await relay(client, 'k', first, 3);
    assert.equal(tokens.length, 4);
    assert.equal(store.handOffs, 0);
    assert.equal(store.releases, 4);
    await client.close();
  });

  it('a waiter that aborts while the key is being handed to it does not keep the lease', async () => {
    const store = new CountingStore();
    const hold = deferred<void>();
    store.hold = hold.promise;
    const client = new LeaseClient({ store, ownerId: 'a' });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    const abort = new AbortController();
    const waiting = client.acquire('k', { ttl: 10_000, wait: 60_000, signal: abort.signal });
    const releasing = first.release();
    await store.sent.promise; // the hand-off is on its way to the store
    abort.abort();
    await assert.rejects(waiting, (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'));
    hold.resolve();
    assert.equal((await releasing).status, 'released');
    // The grant that arrived for the departed waiter is released, not leaked.
    const opts = { timeoutMs: 1000, signal: new AbortController().signal };
    for (let i = 0; i < 100 && (await store.inspect('k', opts)).holder !== undefined; i++) {
      await new Promise((r) => setImmediate(r));
    }
    const state = await store.inspect('k', opts);
    assert.equal(state.holder, undefined, 'the handed-off lease was released');
    assert.equal(
      state.lastToken,
      first.token + 1n,
      'the hand-off did grant before it was given back',
    );
    assert.equal(client.heldLeases().length, 0);
    await client.close();
  });

  it('a stale lease cannot hand the key on: the waiter keeps waiting for the real holder', async () => {
    const store = new CountingStore();
    const a = new LeaseClient({ store, ownerId: 'a' });
    const b = new LeaseClient({ store, ownerId: 'b' });
    const opts = { timeoutMs: 1000, signal: new AbortController().signal };
    const first = leaseOf(await a.acquire('k', { ttl: 10_000 }));
    // Another owner takes the key behind a's back (as after a's expiry at the store).
    await store.release({ key: 'k', leaseId: first.leaseId, token: first.token }, opts);
    const other = leaseOf(await b.acquire('k', { ttl: 10_000 }));
    const waiting = a.acquire('k', { ttl: 10_000, wait: 60_000 });
    assert.equal((await first.release()).status, 'not_owner');
    assert.equal(store.handOffs, 1);
    assert.equal(
      (await store.inspect('k', opts)).holder?.token,
      other.token,
      'the holder is untouched',
    );
    await other.release();
    const next = leaseOf(await waiting);
    assert.ok(next.token > other.token);
    await next.release();
    await a.close();
    await b.close();
  });
});
