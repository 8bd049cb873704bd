import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runClaimSeed, sweepClaimSeeds } from '../../src/sim/claim-workload.js';

// The claim workload (issue 42) at test size; `npm run verify` runs it on 100,000 seeds. New
// owners that claim before they start: no stale write is accepted, first writes included.
// The control arm (no claims, fencing on) must show the unfenced first write, or the check
// could not see it.

describe('sim: the claim workload', () => {
  it('with claims, 150 seeds accept no stale write, first writes included', async () => {
    const r = await sweepClaimSeeds({ count: 150, claims: true });
    assert.equal(r.runs, 150);
    assert.ok(r.writesApplied > 1000, `writes applied: ${r.writesApplied}`);
    assert.ok(r.staleWritesRejected > 0, 'stale writes were attempted, and refused');
    assert.equal(r.staleWritesAccepted, 0);
    assert.equal(r.staleFirstWrites, 0);
    assert.deepEqual(r.failingSeeds, []);
  });

  it('without claims (fencing still on), the same seeds show stale first writes accepted', async () => {
    const r = await sweepClaimSeeds({ count: 150, claims: false });
    assert.equal(r.staleWritesAccepted, 0, 'fencing still refuses writes below the mark');
    assert.ok(r.staleFirstWrites > 0, 'the unfenced first write appears');
    assert.ok(r.anomalousRuns > 0);
  });

  it('a seed replays exactly', async () => {
    const a = await runClaimSeed({ seed: 7, claims: false });
    const b = await runClaimSeed({ seed: 7, claims: false });
    assert.deepEqual(a, b);
  });
});
