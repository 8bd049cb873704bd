import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import type { StoreRequestOptions } from '../../../src/core/store.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import { uniqueKey } from '../../support/keys.js';

const opts = (): StoreRequestOptions => ({
  timeoutMs: 10_000,
  signal: new AbortController().signal,
});

// etcd needs no retention pass: this shows why. Released keys leave no entry behind, and a key
// granted again gets a token (base + revision) above every token issued before.
describe('etcd retention: released keys leave nothing, and tokens stay above', () => {
  let cluster: EtcdCluster;
  let raw: Etcd3;
  before(async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'retention' });
    raw = new Etcd3({ hosts: cluster.endpoints });
  });
  after(async () => {
    raw?.close();
    await cluster?.stop();
  });

  it('deletes entries at release, keeps the held one, and later grants are above the highest token', async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints });
    const prefix = uniqueKey('retention');
    try {
      const heldId = randomUUID();
      const held = await store.tryAcquire(
        { key: `${prefix}/held`, leaseId: heldId, ownerId: 'h', ttlMs: 60_000, value: undefined },
        opts(),
      );
      assert.equal(held.status, 'acquired');
      let highest = 0n;
      for (let i = 0; i < 200; i++) {
        const leaseId = randomUUID();
        const key = `${prefix}/gone/${i}`;
        const r = await store.tryAcquire(
          { key, leaseId, ownerId: 'g', ttlMs: 60_000, value: undefined },
          opts(),
        );
        assert.equal(r.status, 'acquired');
        if (r.status !== 'acquired') continue;
        if (r.token > highest) highest = r.token;
        assert.equal(
          (await store.release({ key, leaseId, token: r.token }, opts())).status,
          'released',
        );
      }
      const left = await raw.getAll().prefix(`${prefix}/`).keys();
      assert.equal(left.length, 1, `only the held key's entry is left: ${left.join(', ')}`);
      for (const key of [`${prefix}/gone/0`, `${prefix}/gone/199`, `${prefix}/new`]) {
        const r = await store.tryAcquire(
          { key, leaseId: randomUUID(), ownerId: 'n', ttlMs: 60_000, value: undefined },
          opts(),
        );
        assert.equal(r.status, 'acquired');
        if (r.status === 'acquired')
          assert.ok(r.token > highest, `${key}: ${r.token} > ${highest}`);
      }
      if (held.status === 'acquired') {
        const renewed = await store.renew(
          { key: `${prefix}/held`, leaseId: heldId, token: held.token, ttlMs: 60_000 },
          opts(),
        );
        assert.equal(renewed.status, 'renewed');
      }
    } finally {
      await store.close();
    }
  });
});
