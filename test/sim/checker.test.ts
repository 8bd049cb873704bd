import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory, formatReport, type InvariantId } from '../../src/check/checker.js';
import { HistoryParseError, parseHistory } from '../../src/history/parse.js';
import type { HistoryEvent } from '../../src/history/events.js';

// Hand-written histories: one valid baseline and one violation per invariant.

const meta: HistoryEvent = { type: 'meta', version: 1, t: 0, ttlMs: 1000 };

/** Two leases one after the other, each fenced write applied, a stale release refused. */
function validHistory(): HistoryEvent[] {
  return [
    meta,
    { type: 'acquire', phase: 'invoke', t: 0, proc: 'A', op: 'a1', key: 'job', ttlMs: 1000 },
    {
      type: 'store',
      op: 's1',
      action: 'grant',
      at: 1,
      t: 1,
      key: 'job',
      lease: 'L1',
      token: '33',
      expiresAt: 1001,
    },
    {
      type: 'acquire',
      phase: 'ok',
      t: 2,
      proc: 'A',
      op: 'a1',
      key: 'job',
      token: '33',
      lease: 'L1',
      deadline: 988,
    },
    {
      type: 'store',
      op: 's2',
      action: 'renewed',
      at: 300,
      t: 300,
      key: 'job',
      lease: 'L1',
      token: '33',
      expiresAt: 1300,
    },
    {
      type: 'renew',
      phase: 'ok',
      t: 301,
      proc: 'A',
      op: 'r1',
      key: 'job',
      token: '33',
      lease: 'L1',
      deadline: 1288,
    },
    {
      type: 'write',
      phase: 'invoke',
      t: 400,
      proc: 'A',
      op: 'w1',
      resource: 'result',
      token: '33',
      value: 'a',
    },
    {
      type: 'resource',
      action: 'applied',
      t: 401,
      op: 'w1',
      resource: 'result',
      token: '33',
      hwm: '33',
    },
    {
      type: 'write',
      phase: 'ok',
      t: 402,
      proc: 'A',
      op: 'w1',
      resource: 'result',
      token: '33',
      value: 'a',
    },
    { type: 'acquire', phase: 'invoke', t: 500, proc: 'B', op: 'a2', key: 'job', ttlMs: 1000 },
    { type: 'acquire', phase: 'busy', t: 501, proc: 'B', op: 'a2', key: 'job' },
    { type: 'acquire', phase: 'invoke', t: 1400, proc: 'B', op: 'a3', key: 'job', ttlMs: 1000 },
    {
      type: 'store',
      op: 's3',
      action: 'grant',
      at: 1401,
      t: 1401,
      key: 'job',
      lease: 'L2',
      token: '34',
      expiresAt: 2401,
    },
    {
      type: 'acquire',
      phase: 'ok',
      t: 1402,
      proc: 'B',
      op: 'a3',
      key: 'job',
      token: '34',
      lease: 'L2',
      deadline: 2388,
    },
    {
      type: 'write',
      phase: 'invoke',
      t: 1500,
      proc: 'B',
      op: 'w2',
      resource: 'result',
      token: '34',
      value: 'b',
    },
    {
      type: 'resource',
      action: 'applied',
      t: 1501,
      op: 'w2',
      resource: 'result',
      token: '34',
      hwm: '34',
    },
    {
      type: 'write',
      phase: 'ok',
      t: 1502,
      proc: 'B',
      op: 'w2',
      resource: 'result',
      token: '34',
      value: 'b',
    },
    // A's late write and late release: rejected and refused, as they must be.
    {
      type: 'write',
      phase: 'invoke',
      t: 1600,
      proc: 'A',
      op: 'w3',
      resource: 'result',
      token: '33',
      value: 'a2',
    },
    {
      type: 'resource',
      action: 'rejected',
      t: 1601,
      op: 'w3',
      resource: 'result',
      token: '33',
      hwm: '34',
    },
    {
      type: 'write',
      phase: 'stale',
      t: 1602,
      proc: 'A',
      op: 'w3',
      resource: 'result',
      token: '33',
      value: 'a2',
    },
    {
      type: 'release',
      phase: 'invoke',
      t: 1700,
      proc: 'A',
      op: 'l1',
      key: 'job',
      token: '33',
      lease: 'L1',
    },
    {
      type: 'store',
      op: 's4',
      action: 'not_owner',
      at: 1701,
      t: 1701,
      key: 'job',
      lease: 'L1',
      token: '33',
    },
    {
      type: 'release',
      phase: 'not_owner',
      t: 1702,
      proc: 'A',
      op: 'l1',
      key: 'job',
      token: '33',
      lease: 'L1',
    },
    {
      type: 'store',
      op: 's5',
      action: 'released',
      at: 1800,
      t: 1800,
      key: 'job',
      lease: 'L2',
      token: '34',
    },
    { type: 'final', t: 1900, resource: 'result', values: ['a', 'b'], hwm: '34' },
  ];
}

function violated(events: HistoryEvent[], options = {}): InvariantId[] {
  const report = checkHistory(events, options);
  return (Object.entries(report.invariants) as [InvariantId, { status: string }][])
    .filter(([, r]) => r.status === 'violated')
    .map(([id]) => id);
}

describe('history checker', () => {
  it('finds no violation in a valid history with a stale write rejected and a stale release refused', () => {
    const report = checkHistory(validHistory(), { livenessBoundMs: 1000 });
    assert.equal(report.valid, true, formatReport(report));
    for (const id of ['I1', 'I2', 'I3', 'I4', 'I6', 'I7', 'I8'] as const)
      assert.equal(report.invariants[id].status, 'ok', `${id}: ${formatReport(report)}`);
    assert.equal(report.figures.grants, 2);
    assert.equal(report.figures.staleWritesRejected, 1);
    assert.equal(report.figures.staleWritesAccepted, 0);
    assert.equal(report.figures.minSlackMs, 12);
    assert.deepEqual(report.figures.takeoverMs, [1101]); // B granted 1101 ms after A last renewed
  });

  it('I1: catches token 33 applied after token 34 was applied', () => {
    const h = validHistory().filter((e) => !(e.type === 'resource' && e.op === 'w3'));
    h.push({
      type: 'resource',
      action: 'applied',
      t: 1601,
      op: 'w3',
      resource: 'result',
      token: '33',
    });
    assert.deepEqual(violated(h), ['I1']);
    assert.equal(checkHistory(h).figures.staleWritesAccepted, 1);
  });

  it('I2: catches one token granted to two acquisitions', () => {
    const h = validHistory().map((e) =>
      e.type === 'acquire' && e.op === 'a3' && e.phase === 'ok' ? { ...e, token: '33' } : e,
    );
    assert.ok(violated(h).includes('I2'));
  });

  it('I2: catches a lower token for an acquisition invoked after another completed', () => {
    const h: HistoryEvent[] = [
      { type: 'acquire', phase: 'invoke', t: 0, proc: 'A', op: 'a1', key: 'k' },
      {
        type: 'acquire',
        phase: 'ok',
        t: 5,
        proc: 'A',
        op: 'a1',
        key: 'k',
        token: '7',
        lease: 'L1',
      },
      { type: 'acquire', phase: 'invoke', t: 10, proc: 'B', op: 'a2', key: 'k' },
      {
        type: 'acquire',
        phase: 'ok',
        t: 15,
        proc: 'B',
        op: 'a2',
        key: 'k',
        token: '6',
        lease: 'L2',
      },
    ];
    assert.deepEqual(violated(h), ['I2']);
    // Concurrent acquisitions may complete in either order: no violation.
    const concurrent = [h[0]!, h[2]!, h[1]!, h[3]!].map((e) =>
      e.type === 'acquire' && e.op === 'a2' && e.phase === 'invoke' ? { ...e, t: 1 } : e,
    );
    assert.deepEqual(violated(concurrent), []);
  });

  it('I2: catches a store that grants the same token again after a release', () => {
    const h = validHistory().map((e) =>
      e.type === 'store' && e.op === 's3' ? { ...e, token: '33' } : e,
    );
    assert.ok(violated(h).includes('I2'));
  });

  it('I3: catches two leases valid at once by the store clock', () => {
    const h = validHistory().map((e) =>
      e.type === 'store' && e.op === 's3' ? { ...e, at: 1200 } : e,
    );
    assert.deepEqual(violated(h), ['I3']);
    assert.equal(checkHistory(h).figures.i3Overlaps, 1);
  });

  it('I3: reports an overlap under a store clock jump as expected, not as a failure', () => {
    const h = validHistory().map((e) =>
      e.type === 'store' && e.op === 's3' ? { ...e, at: 1200 } : e,
    );
    h.push({ type: 'fault', t: 1100, fault: 'store_clock_jump', detail: '+2000ms' });
    const report = checkHistory(h);
    assert.equal(report.invariants.I3.status, 'expected');
    assert.equal(report.valid, true);
  });

  it('I4: catches a client deadline later than the store expiry, unless the client clock was faulted', () => {
    const h = validHistory().map((e) =>
      e.type === 'acquire' && e.op === 'a1' && e.phase === 'ok' ? { ...e, deadline: 1050 } : e,
    );
    assert.deepEqual(violated(h), ['I4']);
    h.push({ type: 'fault', t: 0, fault: 'client_clock_rate', proc: 'A', detail: 'x0.5' });
    assert.equal(checkHistory(h).invariants.I4.status, 'expected');
    // A storeExpiresAt carried on the client event (real runs) is used the same way.
    const real: HistoryEvent[] = [
      { type: 'acquire', phase: 'invoke', t: 0, proc: 'A', op: 'a1', key: 'k', ttlMs: 1000 },
      {
        type: 'acquire',
        phase: 'ok',
        t: 3,
        proc: 'A',
        op: 'a1',
        key: 'k',
        token: '1',
        lease: 'L1',
        ttlMs: 1000,
        deadline: 1010,
        storeExpiresAt: 1002,
      },
    ];
    assert.deepEqual(violated(real), ['I4']);
  });

  it('client-observed expiries (etcd): I4 compares nothing, an I3 overlap is unknown, not a violation', () => {
    const grant = (proc: string, op: string, t: number, token: string): HistoryEvent[] => [
      { type: 'acquire', phase: 'invoke', t, proc, op, key: 'k', ttlMs: 1000 },
      {
        type: 'acquire',
        phase: 'ok',
        t: t + 2,
        proc,
        op,
        key: 'k',
        token,
        lease: op,
        ttlMs: 1000,
        deadline: t + 990,
        storeExpiresAt: t + 1002,
        storeExpiryObservedBy: 'client',
      },
    ];
    // B's observed grant falls 500 ms inside A's observed interval.
    const h = [...grant('A', 'a1', 0, '1'), ...grant('B', 'b1', 500, '2')];
    const report = checkHistory(h);
    assert.equal(report.invariants.I3.status, 'unknown', formatReport(report));
    assert.equal(report.invariants.I3.violations.length, 1, 'the overlap is listed');
    assert.match(report.invariants.I3.note ?? '', /observed by the client/);
    assert.equal(report.invariants.I4.status, 'not_checked');
    assert.match(report.invariants.I4.note ?? '', /observed by the client/);
    assert.equal(report.valid, true);
    // The same times reported on the store's clock: a violation of both.
    const onStoreClock = h.map((e) => {
      if (e.type !== 'acquire' || e.phase !== 'ok') return e;
      const { storeExpiryObservedBy: _client, ...rest } = e;
      return rest;
    });
    assert.deepEqual(violated(onStoreClock), ['I3']);
    // The field is checked when parsed.
    assert.throws(
      () =>
        parseHistory(
          '{"type":"acquire","phase":"ok","t":1,"proc":"A","op":"a","key":"k","token":"1","storeExpiryObservedBy":"store"}',
        ),
      HistoryParseError,
    );
  });

  it('I3 from client answers: a released lease ends at its release invoke (a grant inside the release window is no overlap)', () => {
    const grant = (proc: string, op: string, t: number, token: string): HistoryEvent[] => [
      { type: 'acquire', phase: 'invoke', t, proc, op, key: 'k', ttlMs: 1000 },
      {
        ...{ type: 'acquire', phase: 'ok', t: t + 2, proc, op, key: 'k', token, lease: op },
        ...{ ttlMs: 1000, deadline: t + 990, storeExpiresAt: t + 1002 },
      },
    ];
    const release = (invokeAt: number, answerAt: number): HistoryEvent[] => [
      {
        type: 'release',
        phase: 'invoke',
        t: invokeAt,
        proc: 'A',
        op: 'ar',
        key: 'k',
        token: '1',
        lease: 'a1',
      },
      {
        type: 'release',
        phase: 'released',
        t: answerAt,
        proc: 'A',
        op: 'ar',
        key: 'k',
        token: '1',
        lease: 'a1',
      },
    ];
    // Behind a server: A invokes its release at 400, the store applies it and grants B (its
    // clock: 442), A's answer arrives at 480. Linearizable, no overlap.
    const inWindow = [
      ...grant('A', 'a1', 0, '1'),
      ...release(400, 480),
      ...grant('B', 'b1', 440, '2'),
    ];
    const ok = checkHistory(inWindow);
    assert.equal(ok.invariants.I3.status, 'ok', formatReport(ok));
    // B granted (442) before A even invoked its release (460): an overlap for certain.
    const before = [
      ...grant('A', 'a1', 0, '1'),
      ...grant('B', 'b1', 440, '2'),
      ...release(460, 480),
    ];
    assert.ok(violated(before).includes('I3'));
  });

  it('I6: catches an acknowledged write missing at the end, and a rejected write acknowledged as applied', () => {
    const lost = validHistory().map((e) => (e.type === 'final' ? { ...e, values: ['a2'] } : e));
    assert.deepEqual(violated(lost), ['I6']);
    assert.equal(checkHistory(lost).figures.lostAcknowledgedWrites, 2);
    const lied = validHistory().map((e) =>
      e.type === 'write' && e.op === 'w3' && e.phase === 'stale'
        ? { ...e, phase: 'ok' as const }
        : e,
    );
    assert.ok(violated(lied).includes('I6'));
  });

  it('I7: catches a renewal that resurrects an expired lease', () => {
    const h = validHistory();
    h.splice(11, 0, {
      type: 'store',
      op: 's9',
      action: 'renewed',
      at: 1350,
      t: 1350,
      key: 'job',
      lease: 'L1',
      token: '33',
      expiresAt: 2350,
    });
    assert.ok(violated(h).includes('I7'));
  });

  it('I7: catches a release that succeeds for a superseded lease', () => {
    const h = validHistory().map((e) =>
      e.type === 'store' && e.op === 's4' ? { ...e, action: 'released' as const } : e,
    );
    assert.ok(violated(h).includes('I7'));
  });

  it('I7: catches a client that reports a renewal after it declared the lease lost', () => {
    const h = validHistory();
    h.splice(
      6,
      0,
      { type: 'lost', t: 350, proc: 'A', key: 'job', token: '33', lease: 'L1', reason: 'expired' },
      {
        type: 'renew',
        phase: 'ok',
        t: 360,
        proc: 'A',
        op: 'r2',
        key: 'job',
        token: '33',
        lease: 'L1',
      },
    );
    assert.ok(violated(h).includes('I7'));
  });

  it('I8: catches a waiting acquirer that does not get a free key within the bound', () => {
    const h: HistoryEvent[] = [
      {
        type: 'store',
        op: 's1',
        action: 'grant',
        at: 0,
        t: 0,
        key: 'k',
        lease: 'L1',
        token: '1',
        expiresAt: 1000,
      },
      { type: 'acquire', phase: 'invoke', t: 500, proc: 'B', op: 'b1', key: 'k', ttlMs: 1000 },
      {
        type: 'store',
        op: 's2',
        action: 'grant',
        at: 4000,
        t: 4000,
        key: 'k',
        lease: 'L2',
        token: '2',
        expiresAt: 5000,
      },
      {
        type: 'acquire',
        phase: 'ok',
        t: 4001,
        proc: 'B',
        op: 'b1',
        key: 'k',
        token: '2',
        lease: 'L2',
      },
      { type: 'final', t: 6000, resource: 'r', values: [] },
    ];
    assert.deepEqual(violated(h, { livenessBoundMs: 1000 }), ['I8']);
    const quick = h.map((e) => (e.type === 'store' && e.op === 's2' ? { ...e, at: 1100 } : e));
    assert.deepEqual(violated(quick, { livenessBoundMs: 1000 }), []);
    assert.deepEqual(checkHistory(quick).figures.takeoverMs, [1100]);
    // Without a bound, liveness is not judged.
    assert.equal(checkHistory(h).invariants.I8.status, 'not_checked');
  });

  it('says what it could not check instead of passing it silently', () => {
    const report = checkHistory([
      { type: 'acquire', phase: 'invoke', t: 0, proc: 'A', op: 'a1', key: 'k' },
      { type: 'acquire', phase: 'ok', t: 1, proc: 'A', op: 'a1', key: 'k', token: '1' },
    ]);
    assert.equal(report.invariants.I3.status, 'not_checked');
    assert.equal(report.invariants.I4.status, 'not_checked');
    assert.equal(report.invariants.I6.status, 'not_checked');
    assert.match(formatReport(report), /I3 store-clock exclusivity: not checked/);
  });

  it('round-trips through JSON lines and names the bad line of a malformed history', () => {
    const text = validHistory()
      .map((e) => JSON.stringify(e))
      .join('\n');
    assert.deepEqual(parseHistory(`# comment\n\n${text}\n`), validHistory());
    const bad = [
      ['{"type":"acquire"', /line 2: not JSON/],
      ['{"type":"teleport","t":1}', /line 2: unknown "type"/],
      [
        '{"type":"acquire","phase":"ok","t":1,"proc":"A","op":"a","key":"k","token":33}',
        /"token" must be a decimal string/,
      ],
      [
        '{"type":"acquire","phase":"ok","t":1,"proc":"A","op":"a","key":"k","token":"007"}',
        /"token"/,
      ],
      [
        '{"type":"resource","action":"applied","t":1,"op":"w","resource":"r","token":"9223372036854775808"}',
        /"token"/,
      ],
      [
        '{"type":"write","phase":"maybe","t":1,"proc":"A","op":"w","resource":"r","token":"1"}',
        /"phase"/,
      ],
      ['[1,2]', /must be a JSON object/],
    ] as const;
    for (const [line, re] of bad) {
      assert.throws(
        () => parseHistory(`{"type":"meta","version":1}\n${line}`),
        (err: unknown) => err instanceof HistoryParseError && re.test(err.message),
      );
    }
  });
});
