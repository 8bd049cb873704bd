import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { RealHarness } from '../../src/fault/harness.js';
import {
  ArmTally,
  faultStores,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { tempDir } from '../support/tmp.js';

// F25: the holder's event loop is starved by synchronous work between its lease check and its
// write — at least 1.5 × TTL, and until the next holder has written (a gate file the blocked
// loop polls: the order of the two writes is sequenced, not left to a time margin). No timer
// (renewal, deadline) runs meanwhile.
const TTL = 2000;

// A fault of the resource path, not of the store: SQLite unless LEASEHOLD_FAULT_STORES asks.
for (const store of faultStores(['sqlite'])) {
  describe(`F25 event-loop starvation, real processes (${store.name})`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      'the library knows the lease is gone after the busy loop; the fence rejects the write, the control arm accepts it',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(1, 10);
        const arms = new ArmTally(runs);
        for (let i = 0; i < runs; i++) {
          for (const fencing of [true, false]) {
            const tmp = tempDir('f25');
            const run = await store.run(tmp.dir);
            const h = new RealHarness({
              storeUrl: run.workerUrl,
              resourcePath: `${tmp.dir}/resource.db`,
            });
            h.meta({
              scenario: 'F25',
              ttlMs: TTL,
            });
            try {
              const [a, b] = await Promise.all([h.spawn('A'), h.spawn('B')]);
              const ga = await h.acquireGranted(a, 'job', {
                ttlMs: TTL,
                waitMs: 0,
                renewEveryMs: 500,
              });
              assert.equal(ga.status, 'ok');
              const bGets = h.acquire(b, 'job', { ttlMs: TTL, waitMs: 5 * TTL, renewEveryMs: 500 });
              const gate = `${tmp.dir}/b-has-written`;
              h.fault('starve', 'A', `${1.5 * TTL}ms busy loop, then until B has written`);
              const aWrite = h.write(a, {
                scope: 'job',
                value: 'A',
                fenced: fencing,
                check: true,
                token: ga.token!,
                busyLoopMs: 1.5 * TTL,
                busyUntilFile: gate,
              });
              const gb = await bGets;
              assert.equal(gb.status, 'ok');
              const bw = await h.write(b, {
                scope: 'job',
                value: 'B',
                fenced: fencing,
                check: true,
                token: gb.token!,
              });
              assert.equal(bw.status, 'applied');
              writeFileSync(gate, '');
              const aw = await aWrite;
              // Rechecked after the starvation, the lease is already invalid in the holder.
              assert.equal(aw.validAfter, false);
              const { report } = await h.finish();
              const where = formatReport(report);
              assert.equal(aw.status, fencing ? 'stale_fence' : 'applied', where);
              arms.add(fencing, report, where);
              assert.equal(report.invariants.I5.status, 'ok', where);
            } finally {
              await Promise.all(h.workers.map((w) => w.kill()));
              await run.close();
              tmp.remove();
            }
          }
        }
        arms.conclude(`real F25 ${store.name}`);
      },
    );
  });
}
