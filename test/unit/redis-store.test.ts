import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { LeaseStore, StoreRequestOptions, Unwatch } from '../../src/core/store.js';
import { RedisLeaseStore } from '../../src/stores/redis/store.js';
import { deletePrefix, TEST_REDIS_URL } from '../contract/harnesses/redis.js';
import { eventually } from '../support/time.js';

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });
const PREFIX = `leasehold-test:store:${process.pid}-${randomBytes(4).toString('hex')}:`;

describe('RedisLeaseStore specifics', () => {
  let redis: Redis;
  let store: RedisLeaseStore;
  before(async () => {
    redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
    store = new RedisLeaseStore({ redis, prefix: PREFIX });
  });
  after(async () => {
    await store.close();
    await deletePrefix(redis, PREFIX);
    redis.disconnect();
  });

  const grant = (key: string, s: LeaseStore = store) =>
    s.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'o', ttlMs: 5000, value: undefined },
      OPTS(),
    );

  it('keeps the record and its counter in one key under the {key} hash tag', async () => {
    const key = 'tenant/{7}/job';
    assert.equal(store.keysOf(key).record, `${PREFIX}{${key}}:lease`);
    const r = await grant(key);
    assert.equal(r.status, 'acquired');
    assert.deepEqual(await redis.keys(`${PREFIX}*`.replace(/[{}]/g, '\\$&')), [
      store.keysOf(key).record,
    ]);
    assert.equal(
      await redis.hget(store.keysOf(key).record, 'token'),
      String((r as { token: bigint }).token),
    );
  });

  it('grants a first token of at least Redis TIME in ms × 1024 (the floor)', async () => {
    const [s0, us0] = (await redis.time()) as [number, number];
    const r = await grant('floor');
    const [s1, us1] = (await redis.time()) as [number, number];
    const ms = (s: string | number, us: string | number): bigint =>
      BigInt(s) * 1000n + BigInt(us) / 1000n;
    const token = (r as { token: bigint }).token;
    assert.ok(token >= ms(s0, us0) * 1024n, `${token} below the floor`);
    assert.ok(token <= ms(s1, us1) * 1024n + 1023n, `${token} far above the floor`);
  });

  it('increments a counter beyond 2^53 exactly (Lua doubles would round it)', async () => {
    const key = 'big-counter';
    await redis.hset(store.keysOf(key).record, 'token', '9007199254740993');
    const r = await grant(key);
    assert.deepEqual(r.status === 'acquired' && r.token, 9_007_199_254_740_994n);
  });

  it('refuses to grant past the largest 64-bit token and leaves the record as it was', async () => {
    const key = 'exhausted';
    await redis.hset(store.keysOf(key).record, 'token', '9223372036854775807');
    await assert.rejects(
      grant(key),
      (err: unknown) => isLeaseholdError(err) && /exhausted/.test(err.message),
    );
    assert.deepEqual(await redis.hgetall(store.keysOf(key).record), {
      token: '9223372036854775807',
    });
  });

  it('with replicas: 1 and no replica to acknowledge, gives the grant back and answers unavailable', async () => {
    const waiting = new RedisLeaseStore({
      redis,
      prefix: PREFIX,
      replicas: 1,
      replicationTimeoutMs: 50,
    });
    await assert.rejects(
      grant('wait-ack', waiting),
      (err: unknown) =>
        isLeaseholdError(err, 'ERR_UNAVAILABLE') && /replicas acknowledged/.test(err.message),
    );
    const state = await store.inspect('wait-ack', OPTS());
    assert.equal(state.holder, undefined, 'the unacknowledged grant was released');
    assert.ok(state.lastToken > 0n, 'and its token stays used');
    await waiting.close();
  });

  it('a release wakes the longest-waiting watcher of the store first (two clients sharing it), then the next', async () => {
    const local = new RedisLeaseStore({ redis: TEST_REDIS_URL, prefix: PREFIX });
    let watches = 0;
    const spy: LeaseStore = Object.create(local) as LeaseStore;
    Object.assign(spy, {
      watch: async (k: string, fn: () => void): Promise<Unwatch> => {
        const u = await local.watch(k, fn);
        watches++;
        return u;
      },
    });
    const holder = new LeaseClient({ store: local, ownerId: 'holder' });
    // Two clients over one store: each client subscribes once per key, the store orders them.
    const early = new LeaseClient({ store: spy, ownerId: 'early', pollInterval: 60_000 });
    const late = new LeaseClient({ store: spy, ownerId: 'late', pollInterval: 60_000 });
    try {
      const key = 'fifo';
      const held = await holder.acquire(key, { ttl: 30_000 });
      assert.equal(held.status, 'acquired');
      const order: string[] = [];
      const first = early.acquire(key, { ttl: 30_000, wait: 20_000 }).then((r) => {
        order.push('first');
        return r;
      });
      await eventually('the first waiter to subscribe', () => (watches === 1 ? true : undefined));
      const second = late.acquire(key, { ttl: 30_000, wait: 20_000 }).then((r) => {
        order.push('second');
        return r;
      });
      await eventually('the second waiter to subscribe', () => (watches === 2 ? true : undefined));
      await held.lease.release();
      const r1 = await first;
      assert.equal(r1.status, 'acquired');
      assert.deepEqual(order, ['first'], 'only the first waiter got the key');
      await r1.lease.release();
      const r2 = await second;
      assert.equal(r2.status, 'acquired');
      assert.deepEqual(order, ['first', 'second']);
      assert.ok(r2.lease.token > r1.lease.token);
      await r2.lease.release();
    } finally {
      await holder.close();
      await early.close();
      await late.close();
      await local.close();
    }
  });

  it('refuses a prefix with hash-tag braces and a non-client redis option', () => {
    assert.throws(
      () => new RedisLeaseStore({ redis, prefix: 'a{b}' }),
      (err: unknown) =>
        isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && err.message.startsWith('prefix'),
    );
    assert.throws(
      () => new RedisLeaseStore({ redis: 42 as never }),
      (err: unknown) =>
        isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && err.message.startsWith('redis'),
    );
  });
});
