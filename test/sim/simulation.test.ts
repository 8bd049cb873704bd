import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatFigures, formatReport } from '../../src/sim/checker.js';
import { runRandomSeed } from '../../src/sim/random-workload.js';
import { pauseScenario } from '../../src/sim/scenarios.js';
import { formatSweep, replayCommand, sweepSeeds } from '../../src/sim/sweep.js';

const SEEDS = Number(process.env.LEASEHOLD_SIM_SEEDS ?? 1000);

describe('deterministic simulation (real client, memory store, seeded network and faults)', () => {
  it(
    `accepts no stale write and breaks no invariant over ${SEEDS} fenced seeds`,
    // ~30 s on an idle 2-core machine (hand-off seeds included); the bound is generous.
    { timeout: 900_000 },
    async () => {
      const r = await sweepSeeds({ count: SEEDS, fencing: true });
      console.log(formatSweep(`sim fenced random workload`, r));
      for (const f of r.failures.slice(0, 3))
        console.log(
          `seed ${f.seed}: ${replayCommand(f.seed, { fencing: true })}\n${formatReport(f.report)}`,
        );
      assert.equal(r.runs, SEEDS);
      assert.deepEqual(
        r.failures.map((f) => f.seed),
        [],
      );
      assert.equal(r.staleWritesAccepted, 0);
      assert.equal(r.lostAcknowledgedWrites, 0);
      // I5 decided on every seed: store operations recorded, linearizable, within the budget.
      assert.equal(r.i5.ok, SEEDS, JSON.stringify(r.i5));
      // The seeds really exercise the fence: stale writes reached it and were rejected.
      assert.ok(
        r.staleWritesRejected > SEEDS / 10,
        `only ${r.staleWritesRejected} stale writes rejected`,
      );
      assert.ok(r.grants > SEEDS * 5);
    },
  );

  it(
    'shows stale writes accepted and acknowledged writes lost in the unfenced control arm',
    { timeout: 600_000 },
    async () => {
      const r = await sweepSeeds({ count: 200, fencing: false });
      console.log(formatSweep('sim unfenced control arm, random workload', r));
      assert.ok(r.staleWritesAccepted > 0);
      assert.ok(r.lostAcknowledgedWrites > 0);
      assert.ok(r.failures.length > 0);
    },
  );

  it(
    'F1 (pause past the TTL): 0 stale writes accepted when fenced, the anomaly in ≥ 95% of unfenced runs',
    { timeout: 600_000 },
    async () => {
      const runs = 200;
      const fig = {
        fenced: {
          grants: 0,
          attempted: 0,
          rejected: 0,
          accepted: 0,
          overlaps: 0,
          takeover: [] as number[],
        },
        anomalies: 0,
      };
      for (let seed = 1; seed <= runs; seed++) {
        const fenced = await pauseScenario(seed, true);
        const f = fenced.report.figures;
        assert.equal(fenced.report.valid, true, `seed ${seed}\n${formatReport(fenced.report)}`);
        assert.equal(
          fenced.facts.aWrite,
          'stale_fence',
          `seed ${seed}: ${JSON.stringify(fenced.facts)}`,
        );
        fig.fenced.grants += f.grants;
        fig.fenced.attempted += f.fencedWritesAttempted;
        fig.fenced.rejected += f.staleWritesRejected;
        fig.fenced.accepted += f.staleWritesAccepted;
        fig.fenced.overlaps += f.i3Overlaps;
        fig.fenced.takeover.push(...f.takeoverMs);
        const control = await pauseScenario(seed, false);
        if (control.report.figures.staleWritesAccepted > 0) fig.anomalies++;
      }
      console.log(
        `sim F1 fenced: ${formatFigures({ runs, grants: fig.fenced.grants, fencedWritesAttempted: fig.fenced.attempted, staleWritesRejected: fig.fenced.rejected, staleWritesAccepted: fig.fenced.accepted, i3Overlaps: fig.fenced.overlaps, takeoverMs: fig.fenced.takeover })}`,
      );
      console.log(`sim F1 unfenced control: anomaly in ${fig.anomalies}/${runs} runs`);
      assert.equal(fig.fenced.accepted, 0);
      assert.equal(fig.fenced.overlaps, 0);
      assert.ok(
        fig.anomalies >= 0.95 * runs,
        `control arm showed the anomaly in only ${fig.anomalies}/${runs}`,
      );
    },
  );

  it('replays a seed exactly: the same seed gives the same history, byte for byte', async () => {
    for (const seed of [3, 17, 4242]) {
      const a = await runRandomSeed({ seed, fencing: true });
      const b = await runRandomSeed({ seed, fencing: true });
      assert.ok(a.history.length > 20);
      assert.equal(a.text, b.text, `seed ${seed} did not replay`);
    }
    const x = await runRandomSeed({ seed: 3, fencing: true });
    const y = await runRandomSeed({ seed: 4, fencing: true });
    assert.notEqual(x.text, y.text);
  });

  // Which invariants catch each planted bug. reuse_token breaks token order at the store (I2)
  // and the model (I5, token not above the last grant). revive_lost is a renewal after expiry:
  // I7 sees it when the store-side record shows it (true time), I5 when the renewal was sent
  // after the lease's expiry by the store's own clock (also under a store clock jump, which I7,
  // measuring true time, cannot see) — each catches seeds the other misses.
  // hand_off_reuse_token grants a waiter the token of the lease its hand-off just released:
  // only seeds whose workers share a client hand off (src/sim/random-workload.ts).
  for (const [bug, invariants] of [
    ['reuse_token', ['I2', 'I5']],
    ['revive_lost', ['I5', 'I7']],
    ['hand_off_reuse_token', ['I2', 'I5']],
  ] as const) {
    it(
      `finds the planted bug ${bug} (breaks ${invariants.join(' or ')}) and its failing seed replays exactly`,
      { timeout: 600_000 },
      async () => {
        const r = await sweepSeeds({ count: 3000, fencing: true, bug, stopOnFailure: true });
        assert.equal(r.failures.length, 1, `no seed in ${r.runs} found ${bug}`);
        const { seed, report } = r.failures[0]!;
        const broken = invariants.filter((i) => report.invariants[i].status === 'violated');
        assert.ok(broken.length > 0, formatReport(report));
        const invariant = broken.join('+');
        console.log(
          `planted bug ${bug}: found by seed ${seed} after ${r.runs} seeds (${invariant}); replay: ${replayCommand(seed, { fencing: true, bug })}`,
        );
        const first = await runRandomSeed({ seed, fencing: true, bug });
        const again = await runRandomSeed({ seed, fencing: true, bug });
        assert.equal(again.text, first.text);
        for (const i of broken) assert.equal(first.report.invariants[i].status, 'violated');
        // The same seed without the bug is clean: the checker blames the bug, not the workload.
        assert.equal((await runRandomSeed({ seed, fencing: true })).report.valid, true);
      },
    );
  }
});
