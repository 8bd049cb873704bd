import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { runOwnerRestartStory } from '../../src/fault/owner-restart-story.js';
import {
  ALL_FAULT_STORES,
  ArmTally,
  CHAOS,
  faultStores,
  type FaultStoreName,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { eachStoreArmRun } from '../support/arm-runs.js';

// Owner restart: the same owner id in a new process while the old process hangs (SIGSTOP)
// with its lease still live. The store contract identifies a lease by its lease id, chosen
// per acquisition; the owner id only names the holder. So the new process neither inherits
// the live lease (its first try is busy, held by its own owner id) nor breaks exclusion (it
// is granted after the old lease's store expiry, with a higher token); the old process's
// late write is rejected by the fence and lands without it.

/** Clock tolerance between the store's reported times and the harness's (same machine). */
const TOLERANCE_MS = 50;

// The story does not depend on the store: `npm test` runs it on SQLite (the store states its
// expiry) and etcd (the client observes it), `npm run chaos` on every store.
const CI_STORES: readonly FaultStoreName[] = ['sqlite', 'etcd'];
const everyStore = CHAOS || (process.env.LEASEHOLD_FAULT_STORES ?? '').trim() !== '';
for (const name of ALL_FAULT_STORES) {
  if (everyStore || CI_STORES.includes(name)) continue;
  describe(`owner restarted while its old lease is live, real processes (${name})`, () => {
    it('runs under npm run chaos', {
      skip: `npm test runs this story on ${CI_STORES.join(' and ')}; npm run chaos (or LEASEHOLD_FAULT_STORES) on ${name}`,
    });
  });
}

for (const store of faultStores(everyStore ? ALL_FAULT_STORES : CI_STORES)) {
  const TTL = Math.max(1000, store.minTtlMs);
  describe(`owner restarted while its old lease is live, real processes (${store.name})`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      'the new process with the same owner id is refused until the old lease expires, then gets a higher token; fenced: the old process late write is rejected; unfenced: it lands',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(1, 10);
        const arms = new ArmTally(runs);
        await eachStoreArmRun(store, runs, 'owner', async ({ i, fencing, dir, label }, run) => {
          const r = await runOwnerRestartStory({
            storeUrl: run.workerUrl,
            resourcePath: `${dir}/resource.db`,
            ttlMs: TTL,
            fencing,
            key: `job-${i}`,
            ownerId: 'billing-worker-1',
          });
          const where = `${label}\n${formatReport(r.report)}`;
          assert.equal(r.firstTry, 'busy', where);
          assert.equal(r.firstTryHolder, 'billing-worker-1', where);
          assert.ok(BigInt(r.newToken) > BigInt(r.oldToken), where);
          // Where the store reports its own clock, the grant follows the old expiry.
          if (!store.expiryObservedByClient) {
            assert.ok(r.grantAfterOldExpiryMs !== undefined, where);
            assert.ok(r.grantAfterOldExpiryMs >= -TOLERANCE_MS, where);
          }
          assert.equal(r.newWrite, 'applied', where);
          assert.equal(r.oldWrite, fencing ? 'stale_fence' : 'applied', where);
          assert.equal(r.oldRelease, 'not_owner', where);
          assert.equal(r.newRenew, 'renewed', where);
          for (const inv of ['I2', 'I3', 'I5', 'I7'] as const)
            assert.equal(r.report.invariants[inv].status, 'ok', `${inv}\n${where}`);
          arms.add(fencing, r.report, where);
        });
        arms.conclude(`real owner-restart ${store.name}`, { minAnomalyShare: 1 });
      },
    );
  });
}
