import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import * as etcd from '../../src/stores/etcd/index.js';
import * as postgres from '../../src/stores/postgres/index.js';
import * as redis from '../../src/stores/redis/index.js';
import * as sqlite from '../../src/stores/sqlite/index.js';
import { TEST_REDIS_URL } from '../contract/harnesses/redis.js';

// `leasehold epoch` has a library twin on every store subpath with durable tokens (issue 46):
// the function the command runs, importable without the CLI.
describe('the fencing epoch function of every store', () => {
  it('is exported from the sqlite, postgres, redis and etcd subpaths', () => {
    assert.equal(typeof sqlite.advanceSqliteFencingEpoch, 'function');
    assert.equal(typeof postgres.advancePostgresFencingEpoch, 'function');
    assert.equal(typeof redis.advanceRedisFencingEpoch, 'function');
    assert.equal(typeof etcd.advanceEtcdFencingEpoch, 'function');
  });

  it("raises a Redis store's tokens above the floor it reports, imported from leasehold/redis", async () => {
    const prefix = `lh_subpath_${randomUUID().slice(0, 8)}:`;
    const store = new redis.RedisLeaseStore({ redis: TEST_REDIS_URL, prefix });
    const client = new LeaseClient({ store });
    try {
      const first = await client.acquire('k', { ttl: '10s' });
      assert.equal(first.status, 'acquired');
      const { floor } = await redis.advanceRedisFencingEpoch({ redis: TEST_REDIS_URL, prefix });
      assert.ok(floor >= first.lease.token, `floor ${floor} ≥ ${first.lease.token}`);
      assert.equal((await first.lease.renew()).status, 'lost', 'the epoch cleared the holder');
      const next = await client.acquire('k', { ttl: '10s' });
      assert.equal(next.status, 'acquired');
      assert.ok(next.lease.token > floor, `${next.lease.token} > ${floor}`);
      await next.lease.release();
    } finally {
      await client.close();
      await store.close();
    }
  });
});
