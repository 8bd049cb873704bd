import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../../../src/core/client.js';
import type { Lease } from '../../../src/core/lease.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import { Gate } from '../../support/gate.js';
import { uniqueKey } from '../../support/keys.js';
import { elapse, eventually } from '../../support/time.js';

describe('etcd store sessions: one etcd lease for many leases', () => {
  let cluster: EtcdCluster;
  let raw: Etcd3;
  before(async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'session' });
    raw = new Etcd3({ hosts: cluster.endpoints });
  });
  after(async () => {
    raw?.close();
    await cluster?.stop();
  });

  /** The etcd lease id each lease's entry is attached to. */
  async function etcdLeaseOf(lease: Lease): Promise<string> {
    const res = await raw.getAll().prefix(`${lease.key}/`).exec();
    assert.equal(res.kvs.length, 1, `one entry under ${lease.key}/`);
    return String(res.kvs[0]!.lease);
  }

  async function acquireAll(client: LeaseClient, prefix: string, n: number, ttl: number) {
    const out: Lease[] = [];
    for (let i = 0; i < n; i++) {
      const r = await client.acquire(`${prefix}/${i}`, { ttl });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') out.push(r.lease);
    }
    return out;
  }

  it('leases with the same TTL share one etcd lease; losing it makes every one of them lost and fires their signals', async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({ store, ownerId: 'sessions' });
    const prefix = uniqueKey('session-share');
    try {
      const shared = await acquireAll(client, `${prefix}/a`, 3, 5000);
      const [other] = await acquireAll(client, `${prefix}/b`, 1, 8000);
      const ids = await Promise.all(shared.map(etcdLeaseOf));
      assert.equal(new Set(ids).size, 1, 'one etcd lease for the three 5 s leases');
      assert.notEqual(await etcdLeaseOf(other!), ids[0], 'another TTL, another session');
      // An operator (or a long pause) ends the shared etcd lease.
      await raw.leaseClient.leaseRevoke({ ID: ids[0]! });
      const renewed = await Promise.all(shared.map((l) => l.renew()));
      assert.deepEqual(
        renewed.map((r) => r.status),
        ['lost', 'lost', 'lost'],
      );
      assert.ok(
        shared.every((l) => l.signal.aborted),
        'every affected lease signalled',
      );
      assert.equal((await other!.renew()).status, 'renewed', 'the other session is untouched');
      // The next acquire starts a new session.
      const [again] = await acquireAll(client, `${prefix}/c`, 1, 5000);
      assert.notEqual(await etcdLeaseOf(again!), ids[0]);
      await again!.release();
      await other!.release();
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('a lease that is no longer renewed is deleted after its TTL although its session lives on', async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const a = new LeaseClient({ store, ownerId: 'a' });
    const otherStore = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const b = new LeaseClient({ store: otherStore, ownerId: 'b' });
    const prefix = uniqueKey('session-sweep');
    try {
      const kept = await a.acquire(`${prefix}/kept`, { ttl: 2000 });
      const dropped = await a.acquire(`${prefix}/dropped`, { ttl: 2000, autoRenew: false });
      assert.equal(kept.status, 'acquired');
      assert.equal(dropped.status, 'acquired');
      if (kept.status !== 'acquired' || dropped.status !== 'acquired') return;
      assert.equal(await etcdLeaseOf(kept.lease), await etcdLeaseOf(dropped.lease));
      const t0 = performance.now();
      const taken = await b.acquire(`${prefix}/dropped`, { ttl: 2000, wait: 15_000 });
      assert.equal(taken.status, 'acquired', 'the unrenewed lease was freed');
      const took = performance.now() - t0;
      assert.ok(took < 8000, `freed ${took.toFixed(0)}ms later`);
      assert.ok(kept.lease.isValid(), 'the renewed lease in the same session is still held');
      const state = await b.inspect(`${prefix}/kept`);
      assert.equal(state.holder?.token, kept.lease.token);
      if (taken.status === 'acquired') await taken.lease.release();
      await kept.lease.release();
      await dropped.lease.release();
    } finally {
      await a.close();
      await b.close();
      await store.close();
      await otherStore.close();
    }
  });

  it("an entry deleted behind its holder's back (`etcdctl del`) is lost at its next renewals; the session and its other leases live on", async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({ store, ownerId: 'deleted' });
    const prefix = uniqueKey('session-del');
    try {
      const [victim, other] = await acquireAll(client, prefix, 2, 5000);
      assert.equal(await etcdLeaseOf(victim!), await etcdLeaseOf(other!));
      await raw.delete().key(`${victim!.key}/${BigInt(await etcdLeaseOf(victim!)).toString(16)}`);
      // The store learns of the deletion from its namespace-wide deletion watch (no read per
      // renewal): a renewal racing with the event may still pass once, then it is lost.
      const statuses: string[] = [];
      for (let i = 0; i < 20 && !statuses.includes('lost'); i++) {
        statuses.push((await victim!.renew()).status);
      }
      assert.ok(statuses.includes('lost'), `renewals after the delete: ${statuses.join(', ')}`);
      assert.ok(statuses.length <= 2, `lost only after ${statuses.length} renewals`);
      assert.ok(victim!.signal.aborted, 'its signal fired');
      assert.equal((await other!.renew()).status, 'renewed', 'the other lease is untouched');
      await other!.release();
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('renewal traffic does not grow with the number of leases held', async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({ store, ownerId: 'many' });
    const prefix = uniqueKey('session-traffic');
    try {
      const leases = await acquireAll(client, prefix, 60, 2000);
      let renewals = 0;
      const off = client.on('renewed', () => renewals++);
      const k0 = store.keepAlivesSent;
      await elapse(3000);
      off();
      const keepAlives = store.keepAlivesSent - k0;
      assert.ok(renewals >= 60 * 3, `each lease renewed about every 666 ms (${renewals} renewals)`);
      // Rounds are at least renewBatchMs (100 ms) apart: at most ~30 in 3 s, however many leases.
      assert.ok(keepAlives <= 3000 / 100 + 3, `${keepAlives} keepalives for ${renewals} renewals`);
      assert.ok(renewals >= 3 * keepAlives, `${renewals} renewals shared ${keepAlives} keepalives`);
      await eventually('all still valid', () =>
        leases.every((l) => l.isValid()) ? true : undefined,
      );
      await Promise.all(leases.map((l) => l.release()));
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('a release answers released when the keepalive round sweeps the entry while the release is in flight', async () => {
    // Under load, the sweep before a keepalive round also deleted entries whose release was
    // still in flight; when its delete reached etcd first, the release's own delete found
    // nothing and the owner was told `not_owner`. Both deletes travel over the client's one
    // HTTP/2 connection, so a TCP hold cannot put one before the other: the release's delete
    // is held at the client's KV call (a gate) until the round's sweep has done its part.
    const etcd = new Etcd3({ hosts: cluster.endpoints });
    const store = new EtcdLeaseStore({ client: etcd, minTtlMs: 1000, renewBatchMs: 0 });
    const prefix = uniqueKey('session-release-race');
    const opts = () => ({ timeoutMs: 5000, signal: new AbortController().signal });
    try {
      const grant = async (key: string) => {
        const leaseId = randomUUID();
        const r = await store.tryAcquire(
          { key, leaseId, ownerId: 'race', ttlMs: 5000, value: undefined },
          opts(),
        );
        assert.equal(r.status, 'acquired');
        return { key, leaseId, token: (r as { token: bigint }).token };
      };
      const released = await grant(`${prefix}/released`);
      const renewed = await grant(`${prefix}/renewed`);
      const entries = await raw.getAll().prefix(`${released.key}/`).keys();
      assert.equal(entries.length, 1);
      const entryKey = entries[0]!;
      // Every delete of the released lease's entry, in call order; the first (the release's)
      // waits at the gate.
      const gate = new Gate();
      const deletes: Promise<unknown>[] = [];
      const txn = etcd.kv.txn.bind(etcd.kv);
      etcd.kv.txn = (req, options) => {
        const deletesEntry = (req.success ?? []).some(
          (op) =>
            op.request_delete_range !== undefined &&
            Buffer.from(op.request_delete_range.key as Buffer).toString('utf8') === entryKey,
        );
        if (!deletesEntry) return txn(req, options);
        const sent =
          deletes.length === 0 ? gate.wait().then(() => txn(req, options)) : txn(req, options);
        deletes.push(sent);
        return sent;
      };
      const release = store.release(released, opts());
      await gate.reached;
      // A renewal of the other lease of the same session runs a keepalive round, and the sweep
      // before it; whatever delete the sweep sends reaches etcd before the held one.
      assert.equal((await store.renew({ ...renewed, ttlMs: 5000 }, opts())).status, 'renewed');
      await Promise.allSettled(deletes.slice(1));
      gate.open();
      assert.deepEqual(await release, { status: 'released' });
      assert.deepEqual(await raw.getAll().prefix(`${released.key}/`).keys(), []);
      assert.deepEqual(await store.release(renewed, opts()), { status: 'released' });
    } finally {
      await store.close();
      etcd.close();
    }
  });
});
