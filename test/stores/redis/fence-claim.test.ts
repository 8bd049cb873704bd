import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisFence } from '../../../src/fencing/redis.js';
import { deletePrefix, TEST_REDIS_URL } from '../../contract/harnesses/redis.js';
import { claimCases, type ClaimSubject } from '../../support/claim-cases.js';

// RedisFence.claim (claim before start, DESIGN §4, I9): the shared claim cases, run by the
// same script as the writes; the marker a claim leaves; a second client sees the claim.

const PREFIX = `leasehold-test:fence-claim:${process.pid}-${randomBytes(4).toString('hex')}:`;
let n = 0;
const scope = (): string => `report/july/${++n}`;
const dataKey = (s: string): string => `${PREFIX}{${s}}:report`;

describe('RedisFence.claim', () => {
  let redis: Redis;
  const subject = (policy: '>=' | '>'): ClaimSubject => {
    const fence = new RedisFence({ redis, prefix: PREFIX, policy });
    return {
      claim: (s, t) => fence.claim(s, t),
      write: async (s, t, body) => (await fence.set(s, t, dataKey(s), body)).status,
      mark: (s) => fence.highWaterMark(s),
      data: async (s) => (await redis.get(dataKey(s))) ?? undefined,
    };
  };

  before(async () => {
    redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect(); // unreachable Redis fails the suite
  });
  after(async () => {
    await deletePrefix(redis, PREFIX);
    redis.disconnect();
  });

  claimCases(subject, scope);

  it('the claim is in Redis, not in the fence object: a fence on another connection honours it', async () => {
    const other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      const a = new RedisFence({ redis, prefix: PREFIX, policy: '>' });
      const b = new RedisFence({ redis: other, prefix: PREFIX, policy: '>' });
      const s = scope();
      assert.deepEqual(await a.claim(s, 42n), { status: 'applied' });
      assert.equal(await redis.get(`${PREFIX}{${s}}:claimed`), '42');
      assert.equal((await b.set(s, 41n, dataKey(s), 'late')).status, 'stale_fence');
      assert.equal((await b.set(s, 42n, dataKey(s), 'first')).status, 'applied');
      assert.equal(await redis.get(`${PREFIX}{${s}}:claimed`), null, 'the first write used it');
      assert.equal((await a.set(s, 42n, dataKey(s), 'second')).status, 'stale_fence');
    } finally {
      other.disconnect();
    }
  });

  it('a claim below the mark writes nothing at all (no marker, no mark)', async () => {
    const fence = new RedisFence({ redis, prefix: PREFIX });
    const s = scope();
    assert.equal((await fence.set(s, 50n, dataKey(s), 'x')).status, 'applied');
    assert.deepEqual(await fence.claim(s, 49n), { status: 'stale_fence', highWaterMark: 50n });
    assert.equal(await redis.exists(`${PREFIX}{${s}}:claimed`), 0);
  });

  it('throws ERR_UNAVAILABLE when Redis cannot be reached', async () => {
    const dead = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    dead.on('error', () => undefined);
    try {
      const fence = new RedisFence({ redis: dead, prefix: PREFIX });
      await assert.rejects(fence.claim(scope(), 5n), { code: 'ERR_UNAVAILABLE' });
    } finally {
      dead.disconnect();
    }
  });
});
