import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { LeaseStore, StoreRequestOptions, Unwatch } from '../../../src/core/store.js';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import { FLUSH_EVERY } from '../../../src/stores/redis/batch.js';
import { deletePrefix, TEST_REDIS_URL } from '../../contract/harnesses/redis.js';
import { eventually } from '../../support/time.js';

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
    // Besides the record, only the store's incarnation record (which server wrote last).
    assert.deepEqual((await redis.keys(`${PREFIX}*`.replace(/[{}]/g, '\\$&'))).sort(), [
      `${PREFIX}incarnation`,
      store.keysOf(key).record,
    ]);
    assert.equal(
      await redis.hget(store.keysOf(key).record, 'token'),
      String((r as { token: bigint }).token),
    );
  });

  it('after a release, a record without its holder id is free though its expiry is still ahead', async () => {
    const key = 'released-fields';
    const rec = store.keysOf(key).record;
    const leaseId = randomUUID();
    const r = await store.tryAcquire(
      { key, leaseId, ownerId: 'o', ttlMs: 60_000, value: 'addr' },
      OPTS(),
    );
    assert.equal(r.status, 'acquired');
    const token = (r as { token: bigint }).token;
    assert.equal((await store.release({ key, leaseId, token }, OPTS())).status, 'released');
    // Release drops the holder's id and value; owner and the future expiry may stay behind.
    const fields = await redis.hgetall(rec);
    assert.equal(fields['token'], token.toString());
    assert.equal(fields['id'], undefined);
    assert.equal(fields['v'], undefined);
    const [sec] = (await redis.time()) as [number, number];
    assert.ok(Number(fields['exp']) > Number(sec) * 1000, 'the expiry left, still ahead');
    const seen = await store.inspect(key, OPTS());
    assert.equal(seen.holder, undefined);
    assert.equal(seen.lastToken, token);
    assert.equal(
      (await store.renew({ key, leaseId, token, ttlMs: 60_000 }, OPTS())).status,
      'lost',
    );
    assert.equal((await store.release({ key, leaseId, token }, OPTS())).status, 'not_owner');
    // The same lease id asking again is a new grant with a new token, not an idempotent re-grant.
    const again = await store.tryAcquire(
      { key, leaseId, ownerId: 'o', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.ok(again.status === 'acquired' && again.token > token, 'a new, higher token');
    const next = await grant(key);
    assert.equal(next.status, 'busy');
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

  it('increments a counter above the floor by one, exactly up to and past 2^53', async () => {
    // The script adds in decimal digits (Lua doubles would round above 2^53).
    for (const last of [
      5_000_000_000_000_000n,
      // A last digit of 9 carries (the one case that is more than one digit changed).
      5_000_000_000_000_009n,
      5_999_999_999_999_999_999n,
      9_007_199_254_740_989n,
      9_007_199_254_740_999n,
      9_007_199_254_740_990n,
      9_007_199_254_740_991n,
      9_007_199_254_740_992n,
    ]) {
      const key = `edge/${last}`;
      await redis.hset(store.keysOf(key).record, 'token', last.toString());
      const r = await grant(key);
      assert.deepEqual(r.status === 'acquired' && r.token, last + 1n, `after ${last}`);
      assert.equal(await redis.hget(store.keysOf(key).record, 'token'), (last + 1n).toString());
    }
  });

  it('writes the expiry as exact Redis TIME ms + ttl and reports it', async () => {
    const [s0, us0] = (await redis.time()) as [number, number];
    const r = await grant('exp');
    const [s1, us1] = (await redis.time()) as [number, number];
    const ms = (s: string | number, us: string | number): number =>
      Number(s) * 1000 + Math.floor(Number(us) / 1000);
    const exp = await redis.hget(store.keysOf('exp').record, 'exp');
    assert.match(exp ?? '', /^[1-9][0-9]*$/);
    assert.ok(Number(exp) >= ms(s0, us0) + 5000 && Number(exp) <= ms(s1, us1) + 5000, exp ?? '');
    assert.equal(r.status === 'acquired' && r.expiresAtWallMs, Number(exp));
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

  it('reserves token blocks exactly around 2^53 and beyond, and starts the next grant above the top', async () => {
    const block = (key: string, tokenBlock: number) =>
      store.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'o', ttlMs: 5000, value: undefined, tokenBlock },
        OPTS(),
      );
    for (const last of [
      5_000_000_000_000_000n,
      9_007_199_254_740_980n, // the block crosses 2^53
      9_007_199_254_740_991n, // the first token is 2^53
      9_223_372_036_854_775_700n,
    ]) {
      const key = `block-edge/${last}`;
      const rec = store.keysOf(key).record;
      await redis.hset(rec, 'token', last.toString());
      const r = await block(key, 64);
      assert.deepEqual(r.status === 'acquired' && r.token, last + 1n, `after ${last}`);
      // The token field is the block's top (what an earlier version reads as the last token);
      // `own` holds the grant's own token for its lease id.
      assert.equal(await redis.hget(rec, 'token'), (last + 64n).toString(), `top after ${last}`);
      const id = await redis.hget(rec, 'id');
      assert.equal(await redis.hget(rec, 'own'), `${last + 1n}:${id}`);
      const seen = await store.inspect(key, OPTS());
      assert.equal(seen.lastToken, last + 64n);
      assert.equal(seen.holder?.token, last + 1n);
      await redis.hdel(rec, 'id'); // released
      const next = await grant(key);
      assert.deepEqual(next.status === 'acquired' && next.token, last + 65n, `next after ${last}`);
      // A block of 1 over a record that has `own` rewrites it for the new lease id.
      assert.equal(await redis.hget(rec, 'token'), (last + 65n).toString());
      const id2 = await redis.hget(rec, 'id');
      assert.equal(await redis.hget(rec, 'own'), `${last + 65n}:${id2}`);
    }
  });

  it('reserves blocks whose top is odd or even just above 2^53 exactly, and the next grant never reuses the top', async () => {
    // An odd integer above 2^53 is not a double: a top computed in Lua numbers came out one
    // lower (…990 + 63 → …052), and the next grant was given the block's last token again.
    const cases: Array<[last: bigint, block: number]> = [
      [9_007_199_254_740_989n, 64], // top …053: odd, above 2^53
      [9_007_199_254_740_988n, 64], // top …052: even
      [9_007_199_254_740_929n, 64], // top 2^53 + 1: the first integer a double cannot hold
      [9_007_199_254_740_928n, 64], // top 2^53 exactly
      [9_007_199_254_740_990n, 3], // token 2^53 − 1, top 2^53 + 1
      [9_007_199_254_740_990n, 4], // top 2^53 + 2
      [9_007_199_254_740_991n, 2], // token 2^53, top 2^53 + 1
      [9_007_199_254_740_992n, 2], // token 2^53 + 1 (odd), top 2^53 + 2
    ];
    for (const [last, tokenBlock] of cases) {
      const key = `block-odd/${last}/${tokenBlock}`;
      const rec = store.keysOf(key).record;
      await redis.hset(rec, 'token', last.toString());
      const r = await store.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'o', ttlMs: 5000, value: undefined, tokenBlock },
        OPTS(),
      );
      const what = `after ${last} with a block of ${tokenBlock}`;
      assert.deepEqual(r.status === 'acquired' && r.token, last + 1n, what);
      const top = last + BigInt(tokenBlock);
      assert.equal(await redis.hget(rec, 'token'), top.toString(), `top ${what}`);
      assert.equal((await store.inspect(key, OPTS())).lastToken, top, `lastToken ${what}`);
      await redis.hdel(rec, 'id'); // released
      const next = await grant(key);
      assert.deepEqual(next.status === 'acquired' && next.token, top + 1n, `next ${what}`);
    }
  });

  it('a process of the version before token blocks still grants above a reserved block, and leaves the block holder alone', async () => {
    const old = readFileSync(
      fileURLToPath(
        new URL('../../../../test/fixtures/redis-acquire-before-token-blocks.lua', import.meta.url),
      ),
      'utf8',
    );
    const key = 'rolling-upgrade';
    const rec = store.keysOf(key).record;
    const oldAcquire = async (leaseId: string): Promise<unknown> =>
      redis.eval(old, 1, rec, leaseId, 'old-process', 300, '');
    // A new process takes the key with a block of 8, for a short TTL.
    const blockHolder = randomUUID();
    const r = await store.tryAcquire(
      { key, leaseId: blockHolder, ownerId: 'new', ttlMs: 300, value: undefined, tokenBlock: 8 },
      OPTS(),
    );
    const t = r.status === 'acquired' ? r.token : 0n;
    // While it holds, the old process is told busy (its view of the token is the block's top).
    const busy = (await oldAcquire(randomUUID())) as unknown[];
    assert.equal(busy[0], 0);
    // The new holder's renew and release work on its own token, not the top.
    assert.equal(
      (await store.renew({ key, leaseId: blockHolder, token: t + 7n, ttlMs: 300 }, OPTS())).status,
      'lost',
    );
    assert.equal(
      (await store.renew({ key, leaseId: blockHolder, token: t, ttlMs: 300 }, OPTS())).status,
      'renewed',
    );
    assert.equal(
      (await store.release({ key, leaseId: blockHolder, token: t }, OPTS())).status,
      'released',
    );
    // Released: the old process grants, above the whole block (a local successor of the new
    // process may have held t + 1 … t + 7).
    const oldId = randomUUID();
    const granted = (await oldAcquire(oldId)) as unknown[];
    assert.equal(granted[0], 1);
    assert.ok(
      BigInt(granted[1] as string) > t + 7n,
      `old grant ${String(granted[1])} inside the block`,
    );
    // The new version sees the old process's lease with its real token (the stale `own` of the
    // block holder names another lease id and is ignored).
    const seen = await store.inspect(key, OPTS());
    assert.equal(seen.holder?.token, BigInt(granted[1] as string));
    assert.equal(seen.lastToken, BigInt(granted[1] as string));
    const busyNew = await grant(key);
    assert.equal(busyNew.status === 'busy' && busyNew.holder.token, BigInt(granted[1] as string));
  });

  it('refuses a block that would pass the largest 64-bit token and leaves the record as it was', async () => {
    const key = 'block-exhausted';
    const rec = store.keysOf(key).record;
    await redis.hset(rec, 'token', '9223372036854775800');
    await assert.rejects(
      store.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'o', ttlMs: 5000, value: undefined, tokenBlock: 8 },
        OPTS(),
      ),
      (err: unknown) => isLeaseholdError(err) && /exhausted/.test(err.message),
    );
    assert.deepEqual(await redis.hgetall(rec), { token: '9223372036854775800' });
    // A block that just fits is granted.
    const r = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'o', ttlMs: 5000, value: undefined, tokenBlock: 7 },
      OPTS(),
    );
    assert.deepEqual(r.status === 'acquired' && r.token, 9_223_372_036_854_775_801n);
    assert.equal(await redis.hget(rec, 'token'), '9223372036854775807');
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

  describe('write coalescing', () => {
    /** Counts the socket flushes (`_write` / `_writev` calls) of a fresh client's socket. */
    async function countedClient(): Promise<{ redis: Redis; flushes: () => number }> {
      const r = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      await r.connect();
      const socket = (r as unknown as { stream: Record<string, (...a: unknown[]) => unknown> })
        .stream;
      let n = 0;
      for (const name of ['_write', '_writev']) {
        const original = socket[name];
        if (typeof original !== 'function') continue;
        socket[name] = function (this: unknown, ...args: unknown[]) {
          n++;
          return original.apply(this, args);
        };
      }
      return { redis: r, flushes: () => n };
    }

    const burst = (s: RedisLeaseStore, tag: string) =>
      Array.from({ length: 32 }, (_, i) => grant(`coalesce/${tag}/${i}`, s));

    it('sends the 32 acquires of one turn in 5 socket writes: the first at once, then 8 each, and answers each', async () => {
      const { redis: r, flushes } = await countedClient();
      const s = new RedisLeaseStore({ redis: r, prefix: PREFIX, evictionCheck: 'off' });
      try {
        await grant('coalesce/warm', s); // loads the script: EVALSHA may need an EVAL first
        const before = flushes();
        const results = await Promise.all(burst(s, 'on'));
        assert.deepEqual(
          results.map((x) => x.status),
          results.map(() => 'acquired'),
        );
        // The first finds nothing in flight and leaves at once; the other 31 find it in flight
        // and leave in writes of FLUSH_EVERY, so Redis starts on them while the rest are made.
        assert.equal(flushes() - before, 1 + Math.ceil(31 / FLUSH_EVERY), 'one flush, then 8 each');
      } finally {
        await s.close();
        r.disconnect();
      }
    });

    it('writes a command with nothing in flight at once, without corking the socket', async () => {
      const { redis: r, flushes } = await countedClient();
      const s = new RedisLeaseStore({ redis: r, prefix: PREFIX, evictionCheck: 'off' });
      try {
        await grant('coalesce/lone-warm', s);
        for (let i = 0; i < 3; i++) {
          const before = flushes();
          const pending = grant(`coalesce/lone/${i}`, s);
          // Written within the call: no cork waiting for the end of the turn.
          assert.equal(flushes() - before, 1, `acquire ${i} written at once`);
          assert.equal(r.stream.writableCorked, 0, 'socket left uncorked');
          assert.equal((await pending).status, 'acquired');
        }
      } finally {
        await s.close();
        r.disconnect();
      }
    });

    it('with coalesceWrites: false, writes each command on its own', async () => {
      const { redis: r, flushes } = await countedClient();
      const s = new RedisLeaseStore({
        redis: r,
        prefix: PREFIX,
        evictionCheck: 'off',
        coalesceWrites: false,
      });
      try {
        await grant('coalesce/warm-off', s);
        const before = flushes();
        await Promise.all(burst(s, 'off'));
        assert.ok(flushes() - before >= 16, `only ${flushes() - before} flushes for 32 commands`);
      } finally {
        await s.close();
        r.disconnect();
      }
    });

    it("keeps the order of the user's own commands on a shared client", async () => {
      const { redis: r } = await countedClient();
      const s = new RedisLeaseStore({ redis: r, prefix: PREFIX, evictionCheck: 'off' });
      const mark = `${PREFIX}coalesce-order`;
      try {
        await s.ready(); // reads the epoch floor, which the first grant would wait for
        // Issued in one turn: the user's SET lands after the acquire and before the GET.
        const acquired = grant('coalesce/order', s);
        const set = r.set(mark, 'after-acquire');
        const get = r.hget(s.keysOf('coalesce/order').record, 'token');
        const [a, ok, token] = await Promise.all([acquired, set, get]);
        assert.equal(ok, 'OK');
        assert.equal(a.status, 'acquired');
        assert.equal(token, String((a as { token: bigint }).token));
      } finally {
        await r.del(mark);
        await s.close();
        r.disconnect();
      }
    });

    it('rejects a coalesceWrites that is not a boolean', () => {
      assert.throws(
        () => new RedisLeaseStore({ redis, coalesceWrites: 'yes' as never }),
        (err: unknown) =>
          isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && err.message.startsWith('coalesceWrites'),
      );
    });
  });
});
