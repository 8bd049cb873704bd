import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { runRealPauseStory } from '../../src/fault/stories.js';
import {
  ArmTally,
  faultStores,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { assertStoryInvariants, eachStoreArmRun } from '../support/arm-runs.js';

// F1 (holder SIGSTOPped past its TTL, then SIGCONT), with F23 (release after expiry) and F24
// (renew after expiry) from the resumed holder.

for (const store of faultStores()) {
  // TTL 1 s where the store allows it (etcd: 2 s). A dead holder's key frees TTL (+ the
  // store's declared expiry lag) after its last renewal; the bound allows 1 s more on a
  // loaded machine.
  const TTL = Math.max(1000, store.minTtlMs);
  describe(`F1 pause past the TTL, real processes (${store.name})`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      'fenced: the late write is rejected, the late release and renew fail and leave the new holder alone; unfenced: the late write lands',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(store.networked ? 2 : 3, 10);
        const arms = new ArmTally(runs);
        await eachStoreArmRun(store, runs, 'f1', async ({ i, fencing, dir, label }, run) => {
          const pauseMs = Math.round(TTL * (1.1 + Math.random() * 1.9));
          const r = await runRealPauseStory({
            storeUrl: run.workerUrl,
            resourcePath: `${dir}/resource.db`,
            ttlMs: TTL,
            renewEveryMs: TTL / 4,
            pauseMs,
            freezeAtMs: 100,
            fencing,
            key: `job-${i}`,
          });
          const where = `${label} pause ${pauseMs}ms\n${formatReport(r.report)}`;
          // The resumed holder's library already knows: its first call reports the lease gone.
          assert.equal(r.aValidAfterResume, false, where);
          assert.equal(r.aRelease, 'not_owner', where);
          assert.equal(r.aRenew, 'lost', where);
          assert.equal(r.bValidAfterA, true, where);
          assert.ok(BigInt(r.bToken!) > BigInt(r.aToken), where);
          // I5: the store's answers, as the workers read them, are linearizable.
          assertStoryInvariants(r.report, store, where);
          arms.add(fencing, r.report, where);
          if (fencing) assert.equal(r.aWrite, 'stale_fence', where);
        });
        arms.conclude(`real F1 ${store.name}`);
        const TAKEOVER_BOUND_MS = TTL + store.expiryLagMs + 1000;
        const p99 = arms.fenced.p99();
        assert.ok(
          p99 !== undefined && p99 <= TAKEOVER_BOUND_MS,
          `takeover p99 ${p99}ms > ${TAKEOVER_BOUND_MS}ms`,
        );
      },
    );
  });
}
