import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { RedisFence } from '../../../../src/fencing/redis.js';
import { RedisLeaseStore } from '../../../../src/stores/redis/store.js';
import { RedisCluster } from '../../../support/redis-cluster.js';
import { runFailoverLoad, type FailoverFigures } from '../../../support/redis-failover-load.js';

const CHAOS = process.env['LEASEHOLD_CHAOS'] === '1';
/** npm test: one short run. Chaos: several longer ones. */
const RUNS = CHAOS ? 5 : 1;
const DURATION_MS = CHAOS ? 30_000 : 8_000;

describe('Redis Cluster: a master SIGKILLed under load, its replica promoted by the cluster', () => {
  const clusters: RedisCluster[] = [];
  after(async () => {
    for (const c of clusters) await c.stop();
  });

  for (let run = 1; run <= RUNS; run++) {
    it(`run ${run}: 8 workers over 24 keys on every master, fenced through the Cluster client — tokens rise per key, 0 stale writes accepted`, async () => {
      const cluster = await RedisCluster.start({ nodeTimeoutMs: 1500 });
      clusters.push(cluster);
      const id = randomBytes(3).toString('hex');
      const prefix = `lh-fo-${id}:`;
      const dataPrefix = `lh-fo-data-${id}:`;
      const keys = Array.from({ length: 24 }, (_, i) => `jobs/k${i}`);
      const masters = await cluster.masterIndexes();
      const victim = masters[run % masters.length]!;
      const masterOfKey = new Map<string, number>();
      for (const k of keys) masterOfKey.set(k, await cluster.masterOf(`${prefix}{${k}}:lease`));
      assert.equal(new Set(masterOfKey.values()).size, 3, 'the keys cover every master');
      const f: FailoverFigures = await runFailoverLoad({
        workers: 8,
        keys,
        durationMs: DURATION_MS,
        faultAtMs: 2000,
        fault: () => cluster.kill(victim),
        affected: (k) => masterOfKey.get(k) === victim,
        ttl: '3s',
        longHoldMs: 3000,
        dataPrefix,
        open: () => {
          const redis = cluster.client();
          return {
            store: new RedisLeaseStore({ redis, prefix }),
            fence: new RedisFence({ redis, prefix: `lh-fo-fence-${id}:` }),
          };
        },
        resource: cluster.client(),
      });
      console.log(`cluster failover run ${run}: ${JSON.stringify(f)}`);
      assert.ok(f.grants > 50, `grants ${f.grants}`);
      assert.ok(f.takeoverMs !== undefined, 'the killed master’s keys were granted again');
      assert.ok(f.staleAttempted > 0, 'the run attempted stale writes');
      assert.equal(f.staleAccepted, 0, 'no stale write accepted');
      assert.equal(f.orderViolations, 0, 'the fence applied tokens in rising order per key');
      assert.equal(f.grantOrderViolations, 0, 'tokens rise per key in grant order');
      await cluster.stop();
    });
  }
});
