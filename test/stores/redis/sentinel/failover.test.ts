import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { RedisFence } from '../../../../src/fencing/redis.js';
import { RedisLeaseStore } from '../../../../src/stores/redis/store.js';
import { runFailoverLoad } from '../../../support/redis-failover-load.js';
import { RedisSentinelGroup } from '../../../support/redis-sentinel.js';

const CHAOS = process.env['LEASEHOLD_CHAOS'] === '1';
/** npm test: one short run per arm. Chaos: several longer ones. */
const RUNS = CHAOS ? 5 : 1;
const DURATION_MS = CHAOS ? 30_000 : 8_000;

describe('Redis Sentinel: the master SIGKILLed under load, a replica promoted by the sentinels', () => {
  const groups: RedisSentinelGroup[] = [];
  after(async () => {
    for (const g of groups) await g.stop();
  });

  for (const replicas of [0, 1]) {
    for (let run = 1; run <= RUNS; run++) {
      const arm = replicas === 0 ? 'no WAIT' : 'WAIT for 1 replica';
      it(`${arm}, run ${run}: 8 workers over 16 keys follow the new master — tokens rise per key, 0 stale writes accepted`, async () => {
        const group = await RedisSentinelGroup.start();
        groups.push(group);
        const id = randomBytes(3).toString('hex');
        const prefix = `lh-sfo-${id}:`;
        const keys = Array.from({ length: 16 }, (_, i) => `jobs/k${i}`);
        const victim = await group.masterIndex();
        let promoted: Promise<number> | undefined;
        const f = await runFailoverLoad({
          workers: 8,
          keys,
          durationMs: DURATION_MS,
          faultAtMs: 2000,
          fault: async () => {
            await group.kill(victim);
            promoted = group.waitFailover(victim);
          },
          ttl: '3s',
          longHoldMs: 3000,
          dataPrefix: `lh-sfo-data-${id}:`,
          open: () => {
            const redis = group.client();
            return {
              store: new RedisLeaseStore({ redis, prefix, replicas, replicationTimeoutMs: 100 }),
              fence: new RedisFence({ redis, prefix: `lh-sfo-fence-${id}:` }),
            };
          },
          resource: group.client(),
        });
        console.log(`sentinel failover (${arm}) run ${run}: ${JSON.stringify(f)}`);
        assert.ok(promoted !== undefined, 'the fault ran');
        assert.notEqual(await promoted, victim, 'a replica was promoted');
        assert.ok(f.grants > 50, `grants ${f.grants}`);
        assert.ok(f.takeoverMs !== undefined, 'grants resumed on the new master');
        assert.ok(f.staleAttempted > 0, 'the run attempted stale writes');
        assert.equal(f.staleAccepted, 0, 'no stale write accepted');
        assert.equal(f.orderViolations, 0, 'the fence applied tokens in rising order per key');
        assert.equal(f.grantOrderViolations, 0, 'tokens rise per key in grant order');
        await group.stop();
      });
    }
  }
});
