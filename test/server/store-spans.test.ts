import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HandOffLeaseStore, LeaseStore } from '../../src/core/store.js';
import { storeWithSpans } from '../../src/server/store-spans.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';

const OPTIONS = { timeoutMs: 1000, signal: new AbortController().signal };

describe('the server store with spans: the same store to its callers', () => {
  it('keeps methods defined as read-only own properties, the class, and which optional methods exist', async () => {
    // ForwardingLeaseStore defines releaseAndAcquire as a read-only own property.
    const inner = new ForwardingLeaseStore(new MemoryLeaseStore());
    const own = Object.getOwnPropertyDescriptor(inner, 'releaseAndAcquire');
    assert.equal(own?.writable, false);
    assert.equal(own?.configurable, false);
    const store = storeWithSpans(inner, 'test', '0');
    assert.ok(store instanceof ForwardingLeaseStore);
    assert.equal(store.kind, 'memory');
    assert.equal('releaseAndAcquire' in store, true);
    assert.equal('renewMany' in store, 'renewMany' in inner);
    const a = await store.tryAcquire(
      { key: 'k', leaseId: 'a'.repeat(32), ownerId: 'a', ttlMs: 5000, value: undefined },
      OPTIONS,
    );
    assert.equal(a.status, 'acquired');
    if (a.status !== 'acquired') return;
    const handOff = await (store as LeaseStore & HandOffLeaseStore).releaseAndAcquire(
      { key: 'k', leaseId: 'a'.repeat(32), token: a.token },
      { key: 'k', leaseId: 'b'.repeat(32), ownerId: 'b', ttlMs: 5000, value: undefined },
      OPTIONS,
    );
    assert.equal(handOff.released, 'released');
    assert.equal(handOff.acquired.status, 'acquired');
    assert.equal((await store.inspect('k', OPTIONS)).holder?.ownerId, 'b');
    await store.close();
  });

  it('a method a store removed by an own undefined property stays absent', () => {
    const inner = new MemoryLeaseStore() as MemoryLeaseStore & { renewMany?: unknown };
    Object.defineProperty(inner, 'renewMany', { value: undefined });
    const store = storeWithSpans(inner, 'test', '0') as LeaseStore & { renewMany?: unknown };
    assert.equal(store.renewMany, undefined);
  });
});
