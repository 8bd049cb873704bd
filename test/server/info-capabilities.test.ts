import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StoreCapabilities } from '../../src/core/types.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import { startTestServer } from '../support/lease-server.js';

/** A memory store that declares the expiry capabilities of an etcd store. */
class EtcdLikeStore extends ForwardingLeaseStore {
  override get capabilities(): StoreCapabilities {
    return { ...super.capabilities, expiryObservedBy: 'client', expiryLagMs: 1500 };
  }
}

describe('/v1/info capabilities reach HttpLeaseStore.connect', () => {
  it('a server whose store only observes expiry says so, and the HTTP store passes it on', async () => {
    const t = await startTestServer({ store: new EtcdLikeStore(new MemoryLeaseStore()) });
    try {
      const info = (await (await fetch(`${t.url}/v1/info`)).json()) as {
        store: { capabilities: Record<string, unknown> };
      };
      assert.equal(info.store.capabilities['expiryObservedBy'], 'client');
      assert.equal(info.store.capabilities['expiryLagMs'], 1500);
      const http = await HttpLeaseStore.connect({ url: t.url });
      try {
        assert.equal(http.capabilities.expiryObservedBy, 'client');
        assert.equal(http.capabilities.expiryLagMs, 1500);
      } finally {
        await http.close();
      }
    } finally {
      await t.close();
    }
  });

  it('a server whose store states its own expiry: the HTTP store claims neither', async () => {
    const t = await startTestServer();
    try {
      const http = await HttpLeaseStore.connect({ url: t.url });
      try {
        assert.equal(http.capabilities.expiryObservedBy, undefined);
        assert.equal(http.capabilities.expiryLagMs, undefined);
      } finally {
        await http.close();
      }
    } finally {
      await t.close();
    }
  });
});
