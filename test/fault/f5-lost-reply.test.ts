import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import type { HistoryEvent } from '../../src/history/events.js';
import { runRealLostReplyStory } from '../../src/fault/network-stories.js';
import {
  ALL_FAULT_STORES,
  ArmTally,
  faultStores,
  runsPerArm,
  storeLink,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { assertStoryInvariants, eachStoreArmRun } from '../support/arm-runs.js';

// F5: a renewal reaches the store and is applied, but its answer is held back by the proxy
// (the connection stays open). The client must treat it as unknown, keep its old deadline,
// and may retry the same lease once the link heals; when an answer is lost for good, the
// lease ends at the client's own deadline although the store extended it.

/** Clock tolerance between the store's and the harness's time scales (same machine). */
const TOLERANCE_MS = 50;

/** Outcome events of one history op (its invoke excluded). */
function outcomes(history: readonly HistoryEvent[], op: string): string[] {
  return history
    .filter((e) => e.type === 'renew' && e.op === op && e.phase !== 'invoke')
    .map((e) => (e.type === 'renew' ? e.phase : ''));
}

// Also through a server whose link to its store is the one cut (http-postgres).
for (const store of faultStores([...ALL_FAULT_STORES, 'http-postgres'])) {
  // 2 s everywhere: the retry after a lost answer must fit in the validity left.
  const TTL = Math.max(2000, store.minTtlMs);
  describe(`F5 renewal applied, answer lost, real processes (${store.name})`, () => {
    if (!store.networked) {
      it('does not apply to SQLite', {
        skip: 'SQLite is embedded: a renewal is a local transaction, there is no answer to lose (docs/safety.md)',
      });
      return;
    }
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      'an applied renewal whose answer is lost is unknown, not success; the retry is accepted; a lost answer for good ends the lease at its local deadline; fenced: the late write is rejected; unfenced: it lands',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(1, 10);
        const arms = new ArmTally(runs);
        await eachStoreArmRun(store, runs, 'f5', async ({ i, fencing, dir, label }, run) => {
          const r = await runRealLostReplyStory({
            storeUrl: run.workerUrl,
            resourcePath: `${dir}/resource.db`,
            ttlMs: TTL,
            fencing,
            key: `job-${i}`,
            link: storeLink(run),
          });
          const where = `${label}\n${formatReport(r.report)}\n${JSON.stringify({ first: r.first, afterFirst: r.afterFirst, retry: r.retry, second: r.second, acquireDeadline: r.acquireDeadline, aLost: r.aLost, bGrantAt: r.bGrantAt })}`;
          for (const u of [r.first, r.second]) {
            // The store answered (its answer is held in the proxy), and A was told "unknown".
            assert.ok(u.heldReplyBytes > 0, `no answer was held\n${where}`);
            assert.equal(u.status, 'unavailable', where);
            // The history holds no outcome (:info), or `unavailable` if the store call failed.
            const o = outcomes(r.history, u.op);
            assert.ok(o.length === 0 || (o.length === 1 && o[0] === 'unavailable'), where);
          }
          // Unknown is not success: A's deadline stayed where its acquire put it.
          assert.equal(r.afterFirst.valid, true, where);
          assert.ok(Math.abs(r.afterFirst.deadline - r.acquireDeadline) < 0.001, where);
          // The retry of the same lease after the heal is accepted and moves the deadline.
          assert.equal(r.retry.status, 'renewed', where);
          assert.ok(r.retry.deadline > r.acquireDeadline, where);
          // The lease ended at the deadline of its last confirmed renewal...
          assert.equal(r.aLost.reason, 'expired', where);
          assert.ok(r.aLost.deadline !== undefined && r.aLost.signalAt !== undefined, where);
          assert.ok(Math.abs(r.aLost.deadline - r.retry.deadline) < 0.001, where);
          // ...before the store's expiry of the renewal it could not confirm,
          assert.ok(r.aLost.signalAt < r.second.invokedAt + TTL, where);
          // which the store did apply: B got the key only after that later expiry.
          assert.ok(r.bGrantAt !== undefined, where);
          // On etcd (store.expiryObservedByClient) bGrantAt comes from B's clock when the
          // answer arrived (a later bound of the grant): there the check below is weaker.
          assert.ok(r.bGrantAt >= r.second.invokedAt + TTL - TOLERANCE_MS, where);
          assert.ok(BigInt(r.bToken) > BigInt(r.aToken), where);
          assert.equal(r.bWrite, 'applied', where);
          assert.equal(r.aRelease, 'not_owner', where);
          assert.equal(r.bRenew, 'renewed', where);
          assertStoryInvariants(r.report, store, where);
          assert.equal(r.aWrite, fencing ? 'stale_fence' : 'applied', where);
          arms.add(fencing, r.report, where);
        });
        // Takeover here runs from A's last *confirmed* renewal: it includes the extension by
        // the renewal whose answer was lost (about TTL / 4 more).
        arms.conclude(`real F5 ${store.name}`, { minAnomalyShare: 1 });
      },
    );
  });
}
