import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { runRandomSeed } from '../../src/sim/random-workload.js';

describe('the random workload passes keys by local succession (decision 007)', () => {
  it('seeds with local successors stay valid; a store that ignores token blocks is caught on every one, by I2 and I5', async () => {
    let seeds = 0;
    let successions = 0;
    let caught = 0;
    let caughtByI5 = 0;
    for (let seed = 1; seed <= 80; seed++) {
      const clean = await runRandomSeed({ seed, fencing: true });
      assert.equal(clean.report.valid, true, `seed ${seed}\n${formatReport(clean.report)}`);
      assert.equal(clean.report.invariants.I5.status, 'ok', `seed ${seed}`);
      if (clean.report.figures.localSuccessions === 0) continue;
      seeds++;
      successions += clean.report.figures.localSuccessions;
      // The store requests record the block each grant asked for (absent when 1), so I5 knows
      // what the store reserved.
      const blocks = new Set(
        clean.history.flatMap((e) =>
          e.type === 'store_op' && e.phase === 'invoke' && (e.f === 'acquire' || e.f === 'hand_off')
            ? [e.tokenBlock ?? 1]
            : [],
        ),
      );
      assert.equal(blocks.size, 1, `seed ${seed}: ${[...blocks].join(', ')}`);
      assert.ok([...blocks][0]! > 1, `seed ${seed}: no store_op carries a tokenBlock`);
      // The same seed on a store that claims token blocks but reserves nothing: the next
      // store grant reuses a token a local successor held (I2), and the next grant after a
      // blocked one is inside its block (I5).
      const bug = await runRandomSeed({ seed, fencing: true, bug: 'ignore_token_block' });
      if (bug.report.invariants.I2.status === 'violated') caught++;
      if (bug.report.invariants.I5.status === 'violated') {
        caughtByI5++;
        assert.match(
          formatReport(bug.report),
          /why: o\d+: token \d+ is not greater than \d+(, the top of the block|: a grant above)/,
          `seed ${seed}`,
        );
      }
    }
    console.log(
      `local succession: ${successions} local successions on ${seeds}/80 seeds; ignore_token_block caught on ${caught} by I2, ${caughtByI5} by I5`,
    );
    assert.ok(seeds >= 8, `${seeds} seeds pass keys locally`);
    assert.equal(caught, seeds);
    assert.equal(caughtByI5, seeds);
  });
});

describe('local succession under a store clock jump (decision 007, "Clock faults")', () => {
  // The four seeds of seeds 1–100,000 on which a store clock jump expired a store lease while
  // its client still believed in it, another process was granted a larger token, and a task
  // of the first client that began waiting only then was handed a token of the old block (I2
  // broken: "each successful acquisition receives a token greater than every token
  // previously issued", the article). The promise now: such a waiter gets a store grant of
  // its own, so I2 holds; the overlap the jump causes is I3's, expected, and the fence (I1)
  // keeps the resource right.
  // A change of schedule (waiters served in arrival order since) can move a seed's jump away
  // from the overlap: each seed must keep I3 to `ok` or `expected`, and the overlap must still
  // happen on at least one of them, so the case keeps testing what it was written for.
  const overlapped: number[] = [];
  for (const seed of [37250, 43822, 60181, 67388]) {
    it(`seed ${seed}: token order holds, any overlap is the expected I3 one, the fence holds`, async () => {
      const run = await runRandomSeed({ seed, fencing: true });
      const text = `seed ${seed}\n${formatReport(run.report)}`;
      assert.ok(run.faults.includes('store_clock_jump'), text);
      assert.ok(run.report.figures.localSuccessions > 0, `seed ${seed} passes no key locally`);
      assert.equal(run.report.invariants.I2.status, 'ok', text);
      assert.equal(run.report.invariants.I1.status, 'ok', text);
      assert.ok(['ok', 'expected'].includes(run.report.invariants.I3.status), text);
      if (run.report.invariants.I3.status === 'expected') overlapped.push(seed);
      assert.equal(run.report.figures.staleWritesAccepted, 0, text);
      assert.equal(run.report.valid, true, text);
    });
  }
  it('the store clock jump still makes an overlap on at least one of these seeds', () => {
    assert.ok(overlapped.length >= 1, `overlaps on ${overlapped.join(', ') || 'none'}`);
  });
});
