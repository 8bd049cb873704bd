import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory } from '../../src/check/checker.js';
import type { HistoryEvent } from '../../src/history/events.js';
import { parseHistory } from '../../src/history/parse.js';
import { runClaimSeed, sweepClaimSeeds } from '../../src/sim/claim-workload.js';

// I9 and the stale first write: A holds 41 and its write is delayed; B acquires 42 and —
// with a claim, or without — has written nothing when A's write reaches the resource. I1
// cannot see it (the resource applied nothing above 41); the checker must: as an I9
// violation when B's claim had been applied there, as a figure when B started unclaimed.

const acquired = (proc: string, op: string, token: string, t: number): HistoryEvent[] => [
  { type: 'acquire', phase: 'invoke', t, proc, op, key: 'job', ttlMs: 1000 },
  { type: 'acquire', phase: 'ok', t: t + 1, proc, op, key: 'job', token },
];
const write = (proc: string, op: string, token: string, t: number): HistoryEvent => ({
  type: 'write',
  phase: 'invoke',
  t,
  proc,
  op,
  resource: 'result',
  token,
});
const applied = (op: string, token: string, t: number): HistoryEvent => ({
  type: 'resource',
  action: 'applied',
  t,
  op,
  resource: 'result',
  token,
  hwm: token,
});
const claim = (action: 'applied' | 'stale_fence', token: string, t: number): HistoryEvent => ({
  type: 'claim',
  action,
  t,
  proc: 'B',
  resource: 'result',
  token,
});

/** A's write at 41 (sent at 10) lands at 3000, after `between`; B writes at 42 afterwards (or never). */
function story(between: HistoryEvent[], bWrites = true): HistoryEvent[] {
  return [
    { type: 'meta', version: 1, t: 0, ttlMs: 1000 },
    ...acquired('A', 'a1', '41', 0),
    write('A', 'w1', '41', 10),
    ...between,
    applied('w1', '41', 3000),
    ...(bWrites ? [write('B', 'w2', '42', 3100), applied('w2', '42', 3101)] : []),
  ];
}

describe('checker: the first write fenced (I9) and the stale first write', () => {
  it('a write below a token claimed there is an I9 violation, though the claimant wrote nothing yet', () => {
    const r = checkHistory(
      story([...acquired('B', 'b1', '42', 2000), claim('applied', '42', 2005)]),
    );
    assert.equal(r.invariants.I1.status, 'ok', 'I1 cannot see it');
    assert.equal(r.invariants.I9.status, 'violated');
    assert.match(
      r.invariants.I9.violations[0]!.message,
      /applied token 41 after token 42 was claimed/,
    );
    assert.equal(r.valid, false);
    assert.equal(r.figures.staleFirstWritesAccepted, 1);
    assert.equal(r.figures.claimsApplied, 1);
  });

  it('without claims: the stale first write is counted, I9 is not checked, the history stays valid', () => {
    const r = checkHistory(story(acquired('B', 'b1', '42', 2000)));
    assert.equal(r.invariants.I9.status, 'not_checked');
    assert.equal(r.valid, true);
    assert.equal(r.figures.staleWritesAccepted, 0);
    assert.equal(r.figures.staleFirstWritesAccepted, 1);
  });

  it('nothing is counted when the write landed before the newer owner started, or its claim was refused', () => {
    const before = story([]).concat(acquired('B', 'b1', '42', 4000));
    assert.equal(checkHistory(before).figures.staleFirstWritesAccepted, 0);
    const refused = story(
      [...acquired('B', 'b1', '42', 2000), claim('stale_fence', '42', 2005)],
      false,
    );
    const r = checkHistory(refused);
    assert.equal(r.figures.staleFirstWritesAccepted, 0, 'a refused claimant never started');
    assert.equal(r.invariants.I9.status, 'ok');
  });

  it('an owner that claims has not started until its claim is applied', () => {
    // B's acquisition answered at 2001, its claim applied only at 3500: A's write at 3000 is fine.
    const h = story([...acquired('B', 'b1', '42', 2000)], false).concat(
      claim('applied', '42', 3500),
    );
    const r = checkHistory(h);
    assert.equal(r.figures.staleFirstWritesAccepted, 0);
    assert.equal(r.invariants.I9.status, 'ok');
  });

  it('reads claim events from a history file', () => {
    const text = story([...acquired('B', 'b1', '42', 2000), claim('applied', '42', 2005)])
      .map((e) => JSON.stringify(e))
      .join('\n');
    assert.equal(checkHistory(parseHistory(text)).invariants.I9.status, 'violated');
    assert.throws(
      () => parseHistory('{"type":"claim","action":"maybe","t":1,"resource":"r","token":"4"}'),
      /"action" must be one of applied, stale_fence/,
    );
  });

  it('on the claim workload the checker counts exactly the stale first writes the workload saw; with claims none, and I9 holds', async () => {
    const control = await sweepClaimSeeds({ count: 20, claims: false });
    assert.ok(control.checkerStaleFirstWrites > 0, 'the control arm shows the anomaly');
    assert.equal(control.checkerStaleFirstWrites, control.staleFirstWrites);
    assert.equal(control.i9Violations, 0, 'no claims, no I9 violation');
    const claims = await sweepClaimSeeds({ count: 20, claims: true });
    assert.equal(claims.checkerStaleFirstWrites, 0);
    assert.equal(claims.i9Violations, 0);
    assert.deepEqual(claims.failingSeeds, []);
    const seed = await runClaimSeed({ seed: 3, claims: true });
    assert.equal(seed.valid, true);
  });
});
