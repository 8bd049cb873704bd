import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { RealHarness } from '../../src/fault/harness.js';
import { runRealPauseStory } from '../../src/fault/stories.js';
import {
  ArmTally,
  FigureTally,
  faultStores,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { tempDir } from '../support/tmp.js';
import { startTwoServers } from '../support/two-servers.js';

// Two `leasehold serve` processes in front of one store (PostgreSQL, etcd), clients spread
// over both. The servers keep no lease state, so exclusion and token order hold across them
// exactly as at the store: checked on the whole history, whichever server answered.

const WORKERS = 4;

for (const store of faultStores(['postgres', 'etcd'])) {
  const TTL = Math.max(1000, store.minTtlMs);
  describe(`two leasehold servers in front of one ${store.name}, real processes`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      'workers on both servers contend for one key: tokens strictly increase in grant order, every fenced write is accepted in order, the store answers across both servers are linearizable against one mutex',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const rounds = runsPerArm(4, 40);
        const tmp = tempDir('two');
        const two = await startTwoServers(store, tmp.dir);
        const h = new RealHarness({
          storeUrl: (w) => two.urlOf((Number(w.slice(1)) % 2) as 0 | 1),
          resourcePath: `${tmp.dir}/resource.db`,
          storeBehindServer: two.storeUrl,
        });
        h.meta({ scenario: 'two-servers', ttlMs: TTL });
        const tally = new FigureTally();
        try {
          const workers = await Promise.all(
            Array.from({ length: WORKERS }, (_, i) => h.spawn(`w${i}`)),
          );
          const tokens: bigint[] = [];
          await Promise.all(
            workers.map(async (w) => {
              for (let r = 0; r < rounds; r++) {
                const g = await h.acquire(w, 'job', {
                  ttlMs: TTL,
                  waitMs: 20 * TTL,
                  renewEveryMs: TTL / 4,
                });
                assert.equal(g.status, 'ok', `${w.name} round ${r} acquire: ${JSON.stringify(g)}`);
                tokens.push(BigInt(g.token!));
                const wr = await h.write(w, {
                  scope: 'job',
                  value: `${w.name}:${r}`,
                  fenced: true,
                  check: true,
                  token: g.token!,
                });
                assert.equal(
                  wr.status,
                  'applied',
                  `${w.name} round ${r} write: ${JSON.stringify(wr)}`,
                );
                assert.equal(await h.release(w, 'job', g.token!, g.lease!), 'released');
              }
            }),
          );
          const { report } = await h.finish();
          tally.add(report.figures);
          console.log(
            tally.line(
              `real two-servers ${store.name} contention (${WORKERS} workers × ${rounds})`,
            ),
          );
          const where = formatReport(report);
          // Exclusion twice: I5, the store's answers each placed anywhere in its own
          // [invoke, answer] window fit one mutex; I3, no grant while an earlier lease was
          // valid by the store's clock (a released lease ends at its release's invoke: behind
          // a server the answer comes after the next waiter was granted through the other).
          for (const inv of ['I1', 'I2', 'I5', 'I7'] as const)
            assert.equal(report.invariants[inv].status, 'ok', `${inv}\n${where}`);
          // On etcd the expiry is the client's observation: an overlap there is `unknown`.
          const i3 = report.invariants.I3.status;
          assert.ok(store.expiryObservedByClient ? i3 !== 'violated' : i3 === 'ok', `I3\n${where}`);
          assert.equal(report.figures.grants, WORKERS * rounds, where);
          // Grant order is the order the acquisitions completed in: strictly increasing.
          assert.deepEqual(
            tokens,
            [...tokens].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
            'tokens in completion order',
          );
          assert.equal(new Set(tokens.map(String)).size, tokens.length, 'no token twice');
        } finally {
          await Promise.all(h.workers.map((w) => w.kill()));
          await two.close();
          tmp.remove();
        }
      },
    );

    it(
      'the holder on one server paused past its TTL, the next holder on the other: fenced, the late write is rejected; unfenced, it lands',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(1, 10);
        const arms = new ArmTally(runs);
        for (let i = 0; i < runs; i++) {
          for (const fencing of [true, false]) {
            const tmp = tempDir('two-f1');
            const two = await startTwoServers(store, tmp.dir);
            try {
              const r = await runRealPauseStory({
                storeUrl: (w) => two.urlOf(w === 'A' ? 0 : 1),
                resourcePath: `${tmp.dir}/resource.db`,
                storeBehindServer: two.storeUrl,
                ttlMs: TTL,
                renewEveryMs: TTL / 4,
                pauseMs: Math.round(TTL * 1.5),
                freezeAtMs: 100,
                fencing,
                key: `job-${i}`,
              });
              const where = `run ${i} ${fencing ? 'fenced' : 'unfenced'}\n${formatReport(r.report)}`;
              assert.equal(r.aRelease, 'not_owner', where);
              assert.equal(r.aRenew, 'lost', where);
              assert.equal(r.bValidAfterA, true, where);
              assert.ok(BigInt(r.bToken!) > BigInt(r.aToken), where);
              // I3 holds here on etcd too: B is granted only seconds after A's last expiry.
              for (const inv of ['I2', 'I3', 'I5', 'I7'] as const)
                assert.equal(r.report.invariants[inv].status, 'ok', `${inv}\n${where}`);
              arms.add(fencing, r.report, where);
              if (fencing) assert.equal(r.aWrite, 'stale_fence', where);
            } finally {
              await two.close();
              tmp.remove();
            }
          }
        }
        arms.conclude(`real two-servers F1 ${store.name}`, { minAnomalyShare: 1 });
      },
    );
  });
}
