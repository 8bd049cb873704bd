import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { formatTimeline, runLessonStory } from '../../src/sim/lesson.js';
import {
  clientClockScenario,
  delayedWriteScenario,
  leaseLengthScenario,
  lostRenewReplyScenario,
  slowAcquireReplyScenario,
} from '../../src/sim/scenarios.js';
import type { HistoryEvent } from '../../src/history/events.js';

function events<T extends HistoryEvent['type']>(
  h: readonly HistoryEvent[],
  type: T,
): Extract<HistoryEvent, { type: T }>[] {
  return h.filter((e): e is Extract<HistoryEvent, { type: T }> => e.type === type);
}

describe('simulation scenarios', () => {
  it("lesson, no fencing: A (token 33) freezes past its lease, B takes token 34, and A's late write overwrites B's", async () => {
    const r = await runLessonStory({ fencing: false });
    assert.equal(r.tokens.a, 33n);
    assert.equal(r.tokens.b, 34n);
    assert.equal(r.outcome, 'overwritten');
    assert.equal(r.finalResult, "A's result");
    assert.equal(r.report.invariants.I1.status, 'violated');
    const text = formatTimeline(r);
    assert.match(text, /0 s {2}Worker A {2}Takes the lease with fencing token 33/);
    assert.match(text, /10 s {2}Lock {6}A's lease expires/);
    assert.match(text, /Worker B {2}Takes the lease with fencing token 34/);
    assert.match(
      text,
      /14 s {2}Storage {3}Accepts A's write \(token 33\) and overwrites B's result/,
    );
  });

  it("lesson, fencing: storage rejects A's write with token 33 after B's 34, and B's result stands", async () => {
    const r = await runLessonStory({ fencing: true });
    assert.equal(r.outcome, 'rejected');
    assert.equal(r.finalResult, "B's result");
    assert.equal(r.report.valid, true, formatReport(r.report));
    assert.equal(r.report.figures.staleWritesRejected, 1);
    // Store-clock exclusivity held: the leases did not overlap, only the writes did.
    assert.equal(r.report.invariants.I3.status, 'ok');
  });

  it('lesson with a pause shorter than the lease: A renews after waking, one owner at a time', async () => {
    const r = await runLessonStory({ pauseMs: 5000 });
    assert.equal(r.outcome, 'one_owner');
    assert.equal(r.report.valid, true);
    assert.equal(r.finalResult, "B's result");
  });

  it('F3 delayed write: the write that arrives after the next holder wrote is rejected (fenced) or lands (unfenced)', async () => {
    const fenced = await delayedWriteScenario(1, true);
    assert.equal(fenced.facts.aWrite, 'stale_fence');
    assert.equal(fenced.facts.bWrite, 'applied');
    assert.equal(fenced.report.valid, true, formatReport(fenced.report));
    const control = await delayedWriteScenario(1, false);
    assert.equal(control.facts.aWrite, 'applied');
    assert.equal(control.report.invariants.I1.status, 'violated');
  });

  it('F5 lost renewal answer: the renewal applied at the store is not taken as success, the client retries in time and keeps the lease', async () => {
    const r = await lostRenewReplyScenario(1);
    const store = events(r.history, 'store');
    const renewedAtStore = store.filter((e) => e.action === 'renewed').length;
    const renewedAtClient = r.history.filter((e) => e.type === 'renew' && e.phase === 'ok').length;
    // The store applied at least one renewal the client never heard of.
    assert.ok(renewedAtStore > renewedAtClient, `${renewedAtStore} vs ${renewedAtClient}`);
    assert.equal(r.report.valid, true, formatReport(r.report));
    assert.equal(r.report.invariants.I7.status, 'ok');
    // A renewal waits at most half the remaining validity (and the request timeout), so the
    // retry after the lost reply lands before the deadline: one dropped packet does not cost
    // the lease (it did when a renewal waited the whole validity).
    const lost = events(r.history, 'lost');
    assert.equal(lost.length, 0);
    assert.equal(r.facts.validAfter, true);
  });

  it('F2 pause between sending acquire and reading the reply: the late grant is never used and is cleaned up', async () => {
    for (const fencing of [true, false]) {
      const r = await slowAcquireReplyScenario(1, fencing);
      assert.equal(r.facts.aOutcome, 'unavailable');
      assert.equal(events(r.history, 'write').filter((w) => w.proc === 'A').length, 0);
      assert.equal(r.facts.bWrite, 'applied');
      // The ghost grant's token is never reused: B's token is higher.
      const grants = events(r.history, 'store').filter((e) => e.action === 'grant');
      assert.deepEqual(
        grants.map((g) => g.token),
        ['1', '2'],
      );
      assert.equal(r.report.valid, true, formatReport(r.report));
    }
  });

  it('client clock jumps: forward ends the lease locally at once, backward fails closed', async () => {
    const fwd = await clientClockScenario(1, true, { kind: 'jump', amountMs: 4000 });
    assert.equal(fwd.facts.validAfterJump, false);
    assert.equal(fwd.facts.lossReason, 'expired');
    assert.equal(fwd.facts.aWrite, undefined);
    assert.equal(fwd.report.valid, true);
    const back = await clientClockScenario(1, true, { kind: 'jump', amountMs: -1000 });
    assert.equal(back.facts.validAfterJump, false);
    assert.equal(back.facts.lossReason, 'clock');
    assert.equal(back.report.valid, true);
  });

  it('client clock at half speed: A overstays its lease (I4 reported as expected) and only the fence stops its write', async () => {
    const fenced = await clientClockScenario(1, true, { kind: 'rate', rate: 0.5 });
    assert.equal(fenced.facts.validBeforeWrite, true);
    assert.equal(fenced.facts.aWrite, 'stale_fence');
    assert.equal(fenced.report.invariants.I4.status, 'expected');
    assert.equal(fenced.report.valid, true);
    const control = await clientClockScenario(1, false, { kind: 'rate', rate: 0.5 });
    assert.equal(control.facts.aWrite, 'applied');
    assert.equal(control.report.invariants.I1.status, 'violated');
    // A fast clock is merely conservative.
    const fast = await clientClockScenario(1, true, { kind: 'rate', rate: 2 });
    assert.equal(fast.report.valid, true);
    assert.equal(fast.report.invariants.I4.status, 'ok');
  });

  it('lease too short: routine 250 ms pauses and network delay cause spurious handovers; a longer lease has none', async () => {
    const short = await leaseLengthScenario(1, 300, { durationMs: 20_000 });
    const long = await leaseLengthScenario(1, 3000, { durationMs: 20_000 });
    console.log(
      `lease too short: TTL 300ms → ${short.facts.handovers} handovers, holder re-grants ${short.facts.holderGrants}; TTL 3s → ${long.facts.handovers}`,
    );
    assert.ok(Number(short.facts.handovers) + Number(short.facts.holderGrants) > 2);
    assert.equal(long.facts.handovers, 0);
    assert.equal(long.facts.holderGrants, 1);
    assert.equal(short.report.valid, true);
    assert.equal(long.report.valid, true);
  });

  it('lease too long: after the holder crashes, takeover waits the whole TTL from its last renewal', async () => {
    const long = await leaseLengthScenario(1, 60_000, { durationMs: 100_000, crashAtMs: 10_000 });
    const short = await leaseLengthScenario(1, 5_000, { durationMs: 30_000, crashAtMs: 10_000 });
    const [tLong] = long.report.figures.takeoverMs;
    const [tShort] = short.report.figures.takeoverMs;
    console.log(
      `lease too long: takeover after crash ${tLong}ms at TTL 60s, ${tShort}ms at TTL 5s`,
    );
    assert.ok(tLong !== undefined && tLong >= 60_000 && tLong <= 61_000, String(tLong));
    assert.ok(tShort !== undefined && tShort >= 5_000 && tShort <= 6_000, String(tShort));
    assert.equal(long.report.valid, true);
  });
});
