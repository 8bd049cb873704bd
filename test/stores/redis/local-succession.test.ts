import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { LeaseClient } from '../../../src/core/client.js';
import type { Lease } from '../../../src/core/lease.js';
import { RedisFence } from '../../../src/fencing/redis.js';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import { deletePrefix, TEST_REDIS_URL } from '../../contract/harnesses/redis.js';

const PREFIX = `leasehold-test:local:${process.pid}-${randomBytes(4).toString('hex')}:`;

function leaseOf(r: Awaited<ReturnType<LeaseClient['acquire']>>): Lease {
  assert.equal(r.status, 'acquired', `expected acquired, got ${r.status}`);
  return r.lease;
}

describe('local succession on the real Redis (decision 007)', () => {
  let redis: Redis;
  let storeA: RedisLeaseStore;
  let storeB: RedisLeaseStore;
  before(async () => {
    redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
    storeA = new RedisLeaseStore({ redis: TEST_REDIS_URL, prefix: PREFIX });
    storeB = new RedisLeaseStore({ redis: TEST_REDIS_URL, prefix: PREFIX });
  });
  after(async () => {
    await storeA.close();
    await storeB.close();
    await deletePrefix(redis, PREFIX);
    redis.disconnect();
  });

  it('a local successor whose store lease expired is fenced out by the next holder elsewhere', async () => {
    const a = new LeaseClient({ store: storeA, ownerId: 'a', localSuccessors: 3 });
    const b = new LeaseClient({ store: storeB, ownerId: 'b' });
    const fence = new RedisFence({ redis, prefix: PREFIX });
    const key = 'report';
    const data = `${PREFIX}{fence}:report`;
    // A's first task holds, its second waits and takes over locally (the store lease was
    // renewed once after it began waiting: decision 007, "Clock faults"); no more renewals,
    // so the store lease (and with it the successor) ends after its TTL, as if A were paused.
    const first = leaseOf(await a.acquire(key, { ttl: 400, autoRenew: false }));
    const waiting = a.acquire(key, { ttl: 400, wait: 5_000, autoRenew: false });
    const began = a.now();
    for (let i = 0; i < 1000 && a.now() <= began; i++)
      await new Promise((resolve) => setTimeout(resolve, 1));
    assert.equal((await first.renew()).status, 'renewed');
    await first.release();
    const successor = leaseOf(await waiting);
    assert.equal(successor.token, first.token + 1n);
    assert.equal(successor.leaseId, first.leaseId, 'the same store lease');
    const state = await b.inspect(key);
    assert.equal(state.holder?.token, first.token, 'observers see the store lease');
    assert.equal(state.lastToken, first.token + 3n, 'the whole block is reserved');
    assert.equal((await fence.set('report', successor.token, data, 'a2')).status, 'applied');
    // B waits for the key: Redis frees it when the store lease expires (Redis TIME).
    const bLease = leaseOf(await b.acquire(key, { ttl: 5_000, wait: 5_000 }));
    assert.equal(successor.isValid(), false, 'the successor ended with its store lease');
    assert.ok(bLease.token > first.token + 3n, `B's token ${bLease.token} is above A's block`);
    assert.equal((await fence.set('report', bLease.token, data, 'b')).status, 'applied');
    // A's late write, with the successor's token, is rejected; B's write stays.
    assert.equal(
      (await fence.set('report', successor.token, data, 'a2-late')).status,
      'stale_fence',
    );
    assert.equal(await redis.get(data), 'b');
    assert.equal((await successor.release()).status, 'not_owner');
    assert.equal((await b.inspect(key)).holder?.token, bLease.token, 'B is untouched');
    await bLease.release();
    await a.close();
    await b.close();
  });
});
