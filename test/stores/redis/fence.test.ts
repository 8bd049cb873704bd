import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { FenceResult } from '../../../src/core/results.js';
import { RedisFence, type FenceDecision } from '../../../src/fencing/redis.js';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import { deletePrefix, TEST_REDIS_URL } from '../../contract/harnesses/redis.js';
import { Gate } from '../../support/gate.js';
import { eventually } from '../../support/time.js';

const PREFIX = `leasehold-test:fence:${process.pid}-${randomBytes(4).toString('hex')}:`;
let n = 0;
const scope = (label: string): string => `${label}/${++n}`;
const dataKey = (s: string, what: string): string => `${PREFIX}{${s}}:${what}`;

describe('Redis fence', () => {
  const conns: Redis[] = [];
  let redis: Redis;
  let fence: RedisFence;

  before(async () => {
    redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect(); // unreachable Redis fails the suite
    conns.push(redis);
    fence = new RedisFence({ redis, prefix: PREFIX });
  });

  after(async () => {
    await deletePrefix(redis, PREFIX);
    for (const c of conns) c.disconnect();
  });

  it('rejects token 41 after token 42 was accepted, and keeps 42’s write', async () => {
    const s = scope('basic');
    const key = dataKey(s, 'report');
    assert.equal((await fence.set(s, 42n, key, 'by-42')).status, 'applied');
    const stale = await fence.set(s, 41n, key, 'by-41');
    assert.deepEqual(stale, { status: 'stale_fence', highWaterMark: 42n });
    assert.equal(await redis.get(key), 'by-42');
    assert.equal(await fence.highWaterMark(s), 42n);
    // '>=' lets the same lease write again.
    assert.equal((await fence.set(s, 42n, key, 'by-42-again')).status, 'applied');
    assert.equal((await fence.set(s, 43n, key, 'by-43')).status, 'applied');
    assert.equal(await redis.get(key), 'by-43');
  });

  it('interleaved concurrent writers: the final state is the highest token’s write and no lower token is accepted after a higher one', async () => {
    const s = scope('concurrent');
    const value = dataKey(s, 'value');
    const log = dataKey(s, 'log');
    const writers = Array.from({ length: 4 }, () => {
      const c = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
      conns.push(c);
      return new RedisFence({ redis: c, prefix: PREFIX });
    });
    // 40 tokens, each written 3 times, in a shuffled order, spread over 4 connections.
    const tokens = Array.from({ length: 40 }, (_, i) => BigInt(1000 + i * 7));
    const writes = tokens.flatMap((t) => [t, t, t]);
    for (let i = writes.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [writes[i], writes[j]] = [writes[j]!, writes[i]!];
    }
    const results = await Promise.all(
      writes.map((t, i) =>
        writers[i % writers.length]!.commands(s, t, [
          { command: 'SET', keys: [value], args: [`v${t}`] },
          { command: 'RPUSH', keys: [log], args: [t.toString()] },
        ]),
      ),
    );
    const accepted = (await redis.lrange(log, 0, -1)).map((x) => BigInt(x));
    assert.equal(accepted.length, results.filter((r) => r.status === 'applied').length);
    for (let i = 1; i < accepted.length; i++) {
      assert.ok(
        accepted[i]! >= accepted[i - 1]!,
        `token ${accepted[i]} was accepted after ${accepted[i - 1]}`,
      );
    }
    const max = tokens[tokens.length - 1]!;
    assert.equal(await redis.get(value), `v${max}`);
    assert.equal(await fence.highWaterMark(s), max);
    for (const [i, r] of results.entries()) {
      if (r.status === 'stale_fence') assert.ok(r.highWaterMark > writes[i]!);
    }
    assert.ok(
      results.some((r) => r.status === 'stale_fence'),
      'the shuffle produced stale writes',
    );
  });

  it('a writer paused past its lease ends stale_fence once the next holder has written (seed: token 41 paused before publish)', async () => {
    const store = new RedisLeaseStore({ redis: TEST_REDIS_URL, prefix: PREFIX });
    const a = new LeaseClient({ store, ownerId: 'writer-a' });
    const b = new LeaseClient({ store, ownerId: 'writer-b' });
    try {
      const s = scope('paused');
      const key = dataKey(s, 'catalog');
      const ra = await a.acquire(s, { ttl: 200, autoRenew: false });
      assert.equal(ra.status, 'acquired');
      const leaseA = ra.lease;
      const paused = new Gate();
      const writerA = (async (): Promise<FenceResult<string>> => {
        await paused.wait(); // A stops here "before publish", holding token leaseA.token
        return fence.set(s, leaseA.token, key, 'report-by-A');
      })();
      await paused.reached;
      const leaseB = await eventually('B to take over after A’s lease expired', async () => {
        const r = await b.acquire(s, { ttl: 5000 });
        return r.status === 'acquired' ? r.lease : undefined;
      });
      assert.ok(leaseB.token > leaseA.token);
      assert.equal((await fence.set(s, leaseB.token, key, 'report-by-B')).status, 'applied');
      paused.open();
      const late = await writerA;
      assert.deepEqual(late, { status: 'stale_fence', highWaterMark: leaseB.token });
      assert.equal(await redis.get(key), 'report-by-B');
      assert.equal(leaseA.isValid(), false);
      await leaseB.release();
      await leaseA.release();
    } finally {
      await a.close();
      await b.close();
      await store.close();
    }
  });

  it('detects a retried write with the same token and idempotency key as a duplicate and applies it once', async () => {
    const s = scope('dup');
    const counter = dataKey(s, 'count');
    const incr = [{ command: 'INCR', keys: [counter] }];
    const first = await fence.commands(s, 7n, incr, { idempotencyKey: 'op-1' });
    assert.deepEqual(first, { status: 'applied', value: [1] });
    assert.deepEqual(await fence.commands(s, 7n, incr, { idempotencyKey: 'op-1' }), {
      status: 'duplicate',
    });
    assert.equal(await redis.get(counter), '1');
    assert.equal((await fence.commands(s, 7n, incr, { idempotencyKey: 'op-2' })).status, 'applied');
    assert.equal((await fence.commands(s, 8n, incr, { idempotencyKey: 'op-1' })).status, 'applied');
    assert.equal(await redis.get(counter), '3');
  });

  it("with policy '>' accepts one write per token", async () => {
    const strict = new RedisFence({ redis, prefix: PREFIX, policy: '>' });
    const s = scope('strict');
    const key = dataKey(s, 'x');
    assert.equal((await strict.set(s, 5n, key, 'a')).status, 'applied');
    assert.deepEqual(await strict.set(s, 5n, key, 'b'), {
      status: 'stale_fence',
      highWaterMark: 5n,
    });
    assert.equal((await strict.set(s, 6n, key, 'c')).status, 'applied');
    assert.equal(await redis.get(key), 'c');
  });

  it('compares tokens above 2^53 and of different lengths exactly (never as doubles or strings)', async () => {
    const s = scope('big');
    const key = dataKey(s, 'x');
    const p53 = 2n ** 53n;
    assert.equal((await fence.set(s, '9', key, 'nine')).status, 'applied');
    assert.equal((await fence.set(s, '10', key, 'ten')).status, 'applied', '"10" > "9"');
    assert.equal((await fence.set(s, '9', key, 'nine')).status, 'stale_fence');
    assert.equal((await fence.set(s, p53 + 1n, key, 'p53+1')).status, 'applied');
    // As doubles, 2^53 and 2^53 + 1 are equal: an unsafe compare would accept this.
    assert.deepEqual(await fence.set(s, p53, key, 'p53'), {
      status: 'stale_fence',
      highWaterMark: p53 + 1n,
    });
    assert.equal((await fence.set(s, p53 + 2n, key, 'p53+2')).status, 'applied');
    assert.equal((await fence.set(s, 9_223_372_036_854_775_806n, key, 'max-1')).status, 'applied');
    assert.deepEqual(await fence.set(s, p53 + 3n, key, 'late'), {
      status: 'stale_fence',
      highWaterMark: 9_223_372_036_854_775_806n,
    });
    assert.equal((await fence.set(s, '9223372036854775807', key, 'max')).status, 'applied');
    assert.equal(await fence.highWaterMark(s), 9_223_372_036_854_775_807n);
    assert.equal(await redis.get(key), 'max');
  });

  it('refuses malformed tokens before anything reaches Redis', async () => {
    const s = scope('bad');
    const key = dataKey(s, 'x');
    for (const bad of [41, '007', '1e3', ' 5', '+5', '0x10', '12abc', '', '0', -1n, 2n ** 63n]) {
      await assert.rejects(
        fence.set(s, bad as never, key, 'v'),
        (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
        `token ${String(bad)}`,
      );
    }
    assert.equal(await redis.exists(key, fence.hwmKey(s)), 0);
  });

  it('runs a user script body only when the token passes, with its own KEYS and ARGV', async () => {
    const s = scope('script');
    const key = dataKey(s, 'h');
    const body = `redis.call('HSET', KEYS[1], 'state', ARGV[1]); return redis.call('HGET', KEYS[1], 'state')`;
    assert.deepEqual(await fence.script(s, 3n, { body, keys: [key], args: ['ready'] }), {
      status: 'applied',
      value: 'ready',
    });
    assert.equal(
      (await fence.script(s, 2n, { body, keys: [key], args: ['old'] })).status,
      'stale_fence',
    );
    assert.equal((await fence.hset(s, 4n, key, { state: 'done', by: '4' })).status, 'applied');
    assert.deepEqual(await redis.hgetall(key), { state: 'done', by: '4' });
  });

  it('a write that fails at Redis throws and leaves the high-water mark unchanged', async () => {
    const s = scope('error');
    const key = dataKey(s, 'list');
    await redis.rpush(key, 'x');
    await assert.rejects(fence.hset(s, 9n, key, { a: '1' }), (err: unknown) =>
      isLeaseholdError(err, 'ERR_PROTOCOL'),
    );
    assert.equal(await fence.highWaterMark(s), 0n);
  });

  it('tells onDecision each decision Redis answered (with the mark on stale_fence), never a failed write', async () => {
    const s = scope('hook');
    const key = dataKey(s, 'report');
    const seen: FenceDecision[] = [];
    const watched = new RedisFence({ redis, prefix: PREFIX, onDecision: (d) => seen.push(d) });
    assert.equal(
      (await watched.set(s, 42n, key, 'a', { idempotencyKey: 'op-1' })).status,
      'applied',
    );
    assert.equal(
      (await watched.set(s, 42n, key, 'a', { idempotencyKey: 'op-1' })).status,
      'duplicate',
    );
    assert.equal((await watched.set(s, 41n, key, 'b')).status, 'stale_fence');
    await redis.del(key);
    await redis.rpush(key, 'x'); // a list: HSET on it fails at Redis
    await assert.rejects(watched.hset(s, 43n, key, { a: '1' }), (err: unknown) =>
      isLeaseholdError(err, 'ERR_PROTOCOL'),
    );
    assert.deepEqual(seen, [
      { scope: s, token: 42n, status: 'applied' },
      { scope: s, token: 42n, status: 'duplicate' },
      { scope: s, token: 41n, status: 'stale_fence', highWaterMark: 42n },
    ]);
  });

  it("tells onDecision each claim, with op 'claim' (and the mark when refused)", async () => {
    const s = scope('hook-claim');
    const seen: FenceDecision[] = [];
    const watched = new RedisFence({ redis, prefix: PREFIX, onDecision: (d) => seen.push(d) });
    assert.equal((await watched.claim(s, 9n)).status, 'applied');
    assert.equal((await watched.claim(s, 8n)).status, 'stale_fence');
    assert.deepEqual(seen, [
      { scope: s, token: 9n, status: 'applied', op: 'claim' },
      { scope: s, token: 8n, status: 'stale_fence', op: 'claim', highWaterMark: 9n },
    ]);
  });
});
