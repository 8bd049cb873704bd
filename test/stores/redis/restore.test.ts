import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../../src/core/client.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { advanceRedisFencingEpoch } from '../../../src/stores/redis/epoch.js';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import { spawnCli } from '../../support/cli.js';
import { startRedis, type RedisProcess } from '../../support/redis-server.js';
import { tempDir } from '../../support/tmp.js';

interface Tally {
  grants: number;
  staleAttempted: number;
  staleRejected: number;
  staleAccepted: number;
}

/**
 * A Redis lease store whose RDB is restored from an older copy. Redis keeps no trace of the
 * writes it lost, so the store cannot notice; its tokens are max(last + 1, TIME_ms × 1024,
 * epoch floor + 1), so only counters that run ahead of the clock repeat. Here they do: an
 * earlier epoch was raised to a fenced resource's mark far above the clock (`--at-least`).
 * Without a new epoch the restored counters reissue tokens and the fence rejects every one;
 * after `leasehold epoch` (the real CLI) every token exceeds every token issued before.
 */
describe('Redis restored from an older RDB', () => {
  const tmp = tempDir('redis-epoch');
  let redis: RedisProcess;
  let fence: SqliteFence;
  const keys = ['jobs/a', 'jobs/b'];
  /** Created only after the snapshot: the restored Redis has no record of it at all. */
  const late = 'jobs/late';
  const marks = new Map<string, bigint>();
  const backup = join(tmp.dir, 'backup.rdb');
  before(async () => {
    redis = await startRedis();
    fence = new SqliteFence({ path: join(tmp.dir, 'resource.db'), policy: '>' });
  });
  after(async () => {
    fence?.close();
    await redis?.stop();
    tmp.remove();
  });

  async function rounds(
    owner: string,
    n: number,
    ks: readonly string[],
    detectIncarnation = true,
  ): Promise<Tally> {
    const store = new RedisLeaseStore({ redis: redis.url, detectIncarnation });
    const client = new LeaseClient({ store, ownerId: owner });
    const t: Tally = { grants: 0, staleAttempted: 0, staleRejected: 0, staleAccepted: 0 };
    try {
      for (let i = 0; i < n; i++) {
        for (const key of ks) {
          const r = await client.acquire(key, { ttl: 5000 });
          assert.equal(r.status, 'acquired', `${key}: ${r.status}`);
          t.grants++;
          const token = r.lease.token;
          const stale = token <= (marks.get(key) ?? 0n);
          if (stale) t.staleAttempted++;
          const w = fence.apply(key, token, () => undefined);
          if (stale && w.status === 'stale_fence') t.staleRejected++;
          if (stale && w.status === 'applied') t.staleAccepted++;
          if (!stale) marks.set(key, token);
          await r.lease.release();
        }
      }
    } finally {
      await client.close();
      await store.close();
    }
    return t;
  }

  it('issues tokens above an earlier epoch floor, is saved, issues more, then is restored', async () => {
    const first = await advanceRedisFencingEpoch({ redis: redis.url, atLeast: 10n ** 18n });
    assert.equal(first.floor, 10n ** 18n);
    await rounds('before', 2, keys);
    const admin = redis.admin();
    try {
      assert.equal(await admin.save(), 'OK');
    } finally {
      admin.disconnect();
    }
    copyFileSync(join(redis.dir, 'dump.rdb'), backup);
    const t = await rounds('before', 4, [...keys, late]);
    assert.equal(t.staleAttempted, 0);
    assert.equal(marks.get(late), 10n ** 18n + 4n);
    await redis.kill();
    copyFileSync(backup, join(redis.dir, 'dump.rdb'));
    await redis.restart();
  });

  it('without a new epoch, the restored counters reissue tokens and the fence rejects every one', async () => {
    // Detection off: the restarted server answers another replication id, and the store
    // would raise the epoch by itself (test/fault/redis-failover-detection.test.ts).
    const t = await rounds('restored', 3, [...keys, late], false);
    console.log(`redis restore, no epoch: ${JSON.stringify(t)}`);
    assert.equal(t.grants, 9);
    assert.equal(t.staleAttempted, 9, 'every token repeats one issued before the restore');
    assert.equal(t.staleRejected, 9);
    assert.equal(t.staleAccepted, 0);
  });

  it('`leasehold epoch` raises the floor: every later token exceeds every token issued before', async () => {
    const cli = spawnCli(['epoch', '--store', redis.url, '--json']);
    assert.equal(await cli.exited, 0, cli.stderr());
    const report = JSON.parse(cli.stdout()) as { floor: string; rowsRaised: number };
    const floor = BigInt(report.floor);
    const highest = [...marks.values()].reduce((a, b) => (a > b ? a : b));
    assert.ok(floor > highest, `floor ${floor} > ${highest}`);
    assert.equal(report.rowsRaised, 3);
    const t = await rounds('after', 3, [...keys, late, 'jobs/new']);
    console.log(`redis restore + epoch: ${JSON.stringify(t)}, floor ${floor}`);
    assert.equal(t.grants, 12);
    assert.equal(t.staleAttempted, 0);
    assert.equal(t.staleAccepted, 0);
    for (const key of [...keys, late, 'jobs/new']) assert.ok(marks.get(key)! > floor);
  });
});
