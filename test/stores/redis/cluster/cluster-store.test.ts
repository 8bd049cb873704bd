import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { LeaseClient } from '../../../../src/core/client.js';
import { isLeaseholdError, LeaseholdError } from '../../../../src/core/errors.js';
import type { LeaseStore, StoreAcquireResult } from '../../../../src/core/store.js';
import { RedisFence } from '../../../../src/fencing/redis.js';
import { MemoryLeaseStore } from '../../../../src/stores/memory/store.js';
import { SqliteLeaseStore } from '../../../../src/stores/sqlite/store.js';
import { RedisLeaseStore } from '../../../../src/stores/redis/store.js';
import { RedisCluster } from '../../../support/redis-cluster.js';
import { tempDir } from '../../../support/tmp.js';
import { checkUrlStoreAndEpoch } from '../../../support/url-store-epoch.js';
import { eventually } from '../../../support/time.js';

/** A store that counts its busy answers, to tell when a waiter has gone to sleep. */
class BusyCountingStore extends RedisLeaseStore {
  busy = 0;
  override async tryAcquire(
    ...args: Parameters<RedisLeaseStore['tryAcquire']>
  ): Promise<StoreAcquireResult> {
    const r = await super.tryAcquire(...args);
    if (r.status === 'busy') this.busy++;
    return r;
  }
}

const prefixOf = (label: string): string => `lh-${label}-${randomBytes(3).toString('hex')}:`;

/** The index of the node where `channel` has a subscriber (Cluster PUBSUB NUMSUB is per node). */
function subscriberNode(cluster: RedisCluster, channel: string): Promise<number> {
  return eventually(`a subscriber of ${channel}`, async () => {
    for (const [i, n] of cluster.nodes.entries()) {
      const admin = n.admin();
      try {
        const reply = (await admin.call('PUBSUB', 'NUMSUB', channel)) as [string, number];
        if (Number(reply[1]) > 0) return i;
      } catch {
        // a killed node
      } finally {
        admin.disconnect();
      }
    }
    return undefined;
  });
}

async function slotOf(c: Cluster, key: string): Promise<number> {
  return Number(await c.cluster('KEYSLOT', key));
}

describe('Redis store on a 3-master + 3-replica Redis Cluster', () => {
  let cluster: RedisCluster;
  const stores: LeaseStore[] = [];
  const clients: LeaseClient[] = [];
  before(async () => {
    cluster = await RedisCluster.start();
  });
  after(async () => {
    for (const c of clients) await c.close();
    for (const s of stores) await s.close();
    await cluster?.stop();
  });
  const store = (options: Partial<ConstructorParameters<typeof RedisLeaseStore>[0]> = {}) => {
    const s = new RedisLeaseStore({ redis: cluster.client(), prefix: prefixOf('s'), ...options });
    stores.push(s);
    return s;
  };

  it('opens from a redis+cluster:// URL (the store closes its client), and leasehold epoch raises every later token above its floor', async () => {
    const seeds = cluster.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
    await checkUrlStoreAndEpoch(`redis+cluster://${seeds}?prefix=${prefixOf('u')}`, 'cluster');
  });

  it("evictionCheck 'refuse': one master on allkeys-lru → ready() rejects and every fresh store answers unavailable", async () => {
    const masters = await cluster.masterIndexes();
    assert.equal(masters.length, 3);
    const bad = cluster.nodes[masters[1]!]!;
    const admin = bad.admin();
    try {
      await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
      // Several fresh stores, each with its own Cluster client: a check that asked one
      // random node would pass for some of them.
      for (let i = 0; i < 6; i++) {
        const s = store({ evictionCheck: 'refuse' });
        await assert.rejects(
          s.ready(),
          (err: unknown) =>
            isLeaseholdError(err, 'ERR_UNAVAILABLE') &&
            err.message.includes('allkeys-lru') &&
            err.message.includes(`:${bad.port}`),
          `store ${i} must refuse`,
        );
        const client = new LeaseClient({ store: s });
        clients.push(client);
        const r = await client.acquire(`jobs/evict-${i}`, { ttl: '5s' });
        assert.equal(r.status, 'unavailable', `store ${i}: acquire answers unavailable`);
      }
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      admin.disconnect();
    }
    // The same cluster with every node on noeviction: accepted.
    const ok = store({ evictionCheck: 'refuse' });
    await ok.ready();
  });

  it("evictionCheck 'refuse' asks replicas too: a replica on allkeys-lru would evict once promoted", async () => {
    const replica = (await cluster.table()).find((n) => n.role === 'replica' && !n.failed);
    assert.ok(replica !== undefined);
    const admin = cluster.nodes[cluster.indexOfPort(replica.port)]!.admin();
    try {
      await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
      await assert.rejects(
        store({ evictionCheck: 'refuse' }).ready(),
        (err: unknown) =>
          isLeaseholdError(err, 'ERR_UNAVAILABLE') && err.message.includes(`:${replica.port}`),
      );
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      admin.disconnect();
    }
  });

  it('a frozen replica does not hold up ready(): its check gives up after 2 s and the store works', async () => {
    const replica = (await cluster.table()).find((n) => n.role === 'replica' && !n.failed);
    assert.ok(replica !== undefined);
    const i = cluster.indexOfPort(replica.port);
    cluster.pause(i);
    try {
      const started = performance.now();
      const s = store({ evictionCheck: 'refuse' });
      await s.ready();
      const tookMs = performance.now() - started;
      assert.ok(tookMs < 10_000, `ready() after ${tookMs.toFixed(0)} ms`);
      const client = new LeaseClient({ store: s });
      clients.push(client);
      const r = await client.acquire('jobs/frozen-replica', { ttl: '5s' });
      assert.equal(r.status, 'acquired');
      await r.lease.release();
    } finally {
      cluster.resume(i);
    }
    await cluster.waitHealthy();
  });

  it('refuses a key beginning with "}" with the same error on every store, and in the Redis fence', async () => {
    const dir = tempDir('brace');
    const sqlite = new SqliteLeaseStore({ path: `${dir.dir}/leases.db` });
    stores.push(sqlite);
    const kinds: [string, LeaseStore][] = [
      ['memory', new MemoryLeaseStore()],
      ['sqlite', sqlite],
      ['redis cluster', store()],
    ];
    const messages: string[] = [];
    try {
      for (const [kind, s] of kinds) {
        const client = new LeaseClient({ store: s });
        clients.push(client);
        const err = await client.acquire('}jobs', { ttl: '5s' }).then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(
          isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
          `${kind}: ${String(err)} is invalid_argument`,
        );
        messages.push(err.message);
      }
      assert.deepEqual(new Set(messages).size, 1, `one message: ${messages.join(' | ')}`);
      assert.equal(messages[0], 'key must not begin with "}", got "}jobs"');
      const fence = new RedisFence({ redis: cluster.client(), prefix: prefixOf('f') });
      await assert.rejects(
        fence.set('}jobs', 1n, 'data:{}jobs}', 'x'),
        (err: unknown) =>
          err instanceof LeaseholdError &&
          err.code === 'ERR_INVALID_ARGUMENT' &&
          err.message === 'scope must not begin with "}", got "}jobs"',
      );
    } finally {
      dir.remove();
    }
  });

  it('fences a key with "}" inside it: lease record, fence mark and data key share one slot', async () => {
    const redis = cluster.client();
    const s = new RedisLeaseStore({ redis, prefix: prefixOf('b') });
    stores.push(s);
    const client = new LeaseClient({ store: s });
    clients.push(client);
    const key = 'jobs}nightly{x';
    const r = await client.acquire(key, { ttl: '10s' });
    assert.equal(r.status, 'acquired');
    const fence = new RedisFence({ redis, prefix: prefixOf('f') });
    const data = `report:{${key}}`;
    const slots = new Set([
      await slotOf(redis, s.keysOf(key).record),
      await slotOf(redis, fence.hwmKey(key)),
      await slotOf(redis, data),
    ]);
    assert.equal(slots.size, 1, 'one slot for the record, the mark and the data');
    assert.equal((await fence.set(key, r.lease.token, data, 'v1')).status, 'applied');
    assert.equal((await fence.set(key, r.lease.token - 1n, data, 'v0')).status, 'stale_fence');
    assert.equal(await redis.get(data), 'v1');
    await r.lease.release();
  });

  it("wakes a waiter at once when the subscriber's node dies with a release unseen (poll 30 s, wake < 10 s)", async () => {
    // The waiter and the holder are separate stores (separate processes, as far as Redis
    // knows), so the release reaches the waiter only through pub/sub.
    const prefix = prefixOf('w');
    const waiterStore = new BusyCountingStore({ redis: cluster.client(), prefix });
    stores.push(waiterStore);
    const holderStore = store({ prefix });
    const waiter = new LeaseClient({ store: waiterStore, pollInterval: '30s' });
    const holder = new LeaseClient({ store: holderStore });
    clients.push(waiter, holder);
    // The waiter's subscription connection opens on its first watch, on a random node.
    const unwatch = await waiterStore.watch('jobs/probe', () => undefined);
    const probe = waiterStore.keysOf('jobs/probe').channel;
    const subNode = await subscriberNode(cluster, probe);
    unwatch();
    // A key served by another master: its release must go through while that node is frozen.
    let key = '';
    for (let i = 0; ; i++) {
      key = `jobs/wake-${i}`;
      if ((await cluster.masterOf(waiterStore.keysOf(key).record)) !== subNode) break;
    }
    const held = await holder.acquire(key, { ttl: '60s', autoRenew: false });
    assert.equal(held.status, 'acquired');
    const waiting = waiter.acquire(key, { ttl: '10s', wait: '50s' });
    assert.equal(
      await subscriberNode(cluster, waiterStore.keysOf(key).channel),
      subNode,
      'the waiter listens on the same connection',
    );
    // The waiter asks once, subscribes, asks again (so a release in between is not missed)
    // and then sleeps: after its second busy answer only a wake-up or its poll brings it back.
    await eventually('the waiter to sleep', () => (waiterStore.busy >= 2 ? true : undefined));
    // Freeze the subscriber's node: the release published now reaches it over the cluster
    // bus but is never delivered. Then kill it, so that publish is gone for good.
    cluster.pause(subNode);
    const releasedAt = performance.now();
    assert.equal((await held.lease.release()).status, 'released');
    await cluster.kill(subNode);
    const r = await waiting;
    const wokeAfterMs = performance.now() - releasedAt;
    assert.equal(r.status, 'acquired', 'the waiter got the key');
    assert.ok(wokeAfterMs < 10_000, `woken ${wokeAfterMs.toFixed(0)} ms after the release`);
    console.log(
      `subscriber node ${subNode} killed: waiter granted ${wokeAfterMs.toFixed(0)} ms after the release (poll 30 s)`,
    );
    if (r.status === 'acquired') await r.lease.release();
    await cluster.restart(subNode);
    await cluster.waitHealthy();
  });
});
