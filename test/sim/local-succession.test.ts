import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatReport } from '../../src/sim/checker.js';
import { runRandomSeed } from '../../src/sim/random-workload.js';

describe('the random workload passes keys by local succession (decision 007)', () => {
  it('seeds with local successors stay valid; a store that ignores token blocks is caught on every one', async () => {
    let seeds = 0;
    let successions = 0;
    let caught = 0;
    for (let seed = 1; seed <= 80; seed++) {
      const clean = await runRandomSeed({ seed, fencing: true });
      assert.equal(clean.report.valid, true, `seed ${seed}\n${formatReport(clean.report)}`);
      if (clean.report.figures.localSuccessions === 0) continue;
      seeds++;
      successions += clean.report.figures.localSuccessions;
      // The same seed on a store that claims token blocks but reserves nothing: the next
      // store grant reuses a token a local successor held.
      const bug = await runRandomSeed({ seed, fencing: true, bug: 'ignore_token_block' });
      if (bug.report.invariants.I2.status === 'violated') caught++;
    }
    console.log(
      `local succession: ${successions} local successions on ${seeds}/80 seeds; ignore_token_block caught on ${caught}`,
    );
    assert.ok(seeds >= 8, `${seeds} seeds pass keys locally`);
    assert.equal(caught, seeds);
  });
});
