import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory, formatReport } from '../../src/check/checker.js';
import { parseHistory } from '../../src/history/parse.js';
import type { HistoryEvent, StoreOpEvent } from '../../src/history/events.js';
import {
  checkLinearizability,
  type LinearizabilityOptions,
} from '../../src/check/linearizability.js';

// Hand-written store-operation histories (W-mutex shape): every way to break I5 we could
// think of must be caught, and valid ones with concurrency and :info must pass. The store's
// clock equals the history's `t` unless a test says otherwise.

type Answer =
  | { acquired: string }
  | 'busy'
  | 'renewed'
  | 'lost'
  | 'released'
  | 'not_owner'
  | 'info'
  | undefined;

interface OpSpec {
  readonly proc?: string;
  readonly key?: string;
  readonly lease: string;
  readonly token?: string;
  readonly ttl?: number;
  /** Invocation and answer times; the answer is omitted (no event) when `answer` is undefined. */
  readonly at: readonly [number, number?];
  /** Store clock minus harness clock (default 0); `null`: no storeAt at all. */
  readonly storeOffset?: number | null;
}

let counter = 0;
function op(f: StoreOpEvent['f'], spec: OpSpec, answer: Answer): StoreOpEvent[] {
  const id = `o${++counter}`;
  const off = spec.storeOffset === undefined ? 0 : spec.storeOffset;
  const store = (t: number) => (off === null ? {} : { storeAt: t + off });
  const base = { type: 'store_op', f, proc: spec.proc ?? 'P', op: id, key: spec.key ?? 'job' };
  const invoke: StoreOpEvent = {
    ...base,
    phase: 'invoke',
    t: spec.at[0],
    lease: spec.lease,
    ...(spec.token === undefined ? {} : { token: spec.token }),
    ...(f === 'release' ? {} : { ttlMs: spec.ttl ?? 1000 }),
    ...store(spec.at[0]),
  } as StoreOpEvent;
  if (answer === undefined) return [invoke];
  const t = spec.at[1] ?? spec.at[0];
  const done: StoreOpEvent = {
    ...base,
    t,
    ...(typeof answer === 'object'
      ? { phase: 'acquired', token: answer.acquired }
      : { phase: answer }),
    ...(answer === 'info' ? { error: 'timeout' } : store(t)),
  } as StoreOpEvent;
  return [invoke, done];
}
const acquire = (s: OpSpec, a: Answer) => op('acquire', s, a);
const renew = (s: OpSpec, a: Answer) => op('renew', s, a);
const release = (s: OpSpec, a: Answer) => op('release', s, a);

/** Events sorted by time, as a recorder would have written them. */
function history(...ops: StoreOpEvent[][]): HistoryEvent[] {
  return ops.flat().sort((a, b) => a.t - b.t);
}

function verdict(events: HistoryEvent[], options: LinearizabilityOptions = {}) {
  return checkLinearizability(events, options).status;
}

describe('I5 linearizability checker: violations are caught', () => {
  it('two concurrent grants with no linearization (the first lease is still live)', () => {
    const h = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 1000, at: [0, 10] }, { acquired: '1' }),
      acquire({ proc: 'B', lease: 'L2', ttl: 1000, at: [0, 10] }, { acquired: '2' }),
    );
    assert.equal(verdict(h), 'violated');
    const report = checkHistory(h);
    assert.equal(report.invariants.I5.status, 'violated');
    assert.equal(report.valid, false);
    assert.match(report.invariants.I5.violations[0]!.message, /on job, no linearization once o\d+/);
  });

  it('a grant while a live lease exists, long after the first grant was answered', () => {
    const h = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '1' }),
      acquire({ proc: 'B', lease: 'L2', ttl: 1000, at: [100, 105] }, { acquired: '2' }),
    );
    assert.equal(verdict(h), 'violated');
  });

  it('a grant one instant before the holder expires, while at expiry itself it is free', () => {
    // L1 granted at store time exactly 0: expires at 1000. Free at 1000 (expiresAt ≤ now).
    const early = history(
      acquire({ lease: 'L1', ttl: 1000, at: [0, 0] }, { acquired: '1' }),
      acquire({ lease: 'L2', ttl: 1000, at: [999, 999] }, { acquired: '2' }),
    );
    const onTime = history(
      acquire({ lease: 'L1', ttl: 1000, at: [0, 0] }, { acquired: '1' }),
      acquire({ lease: 'L2', ttl: 1000, at: [1000, 1000] }, { acquired: '2' }),
    );
    assert.equal(verdict(early), 'violated');
    assert.equal(verdict(onTime), 'ok');
  });

  it('a token not greater than an earlier grant (equal or lower), gaps allowed', () => {
    const base = [
      acquire({ proc: 'A', lease: 'L1', at: [0, 5] }, { acquired: '5' }),
      release({ proc: 'A', lease: 'L1', token: '5', at: [10, 15] }, 'released'),
    ];
    const same = history(...base, acquire({ lease: 'L2', at: [20, 25] }, { acquired: '5' }));
    const lower = history(...base, acquire({ lease: 'L2', at: [20, 25] }, { acquired: '4' }));
    const gap = history(...base, acquire({ lease: 'L2', at: [20, 25] }, { acquired: '9' }));
    assert.equal(verdict(same), 'violated');
    assert.equal(verdict(lower), 'violated');
    assert.equal(verdict(gap), 'ok');
    assert.match(
      formatReport(checkHistory(same)),
      /why: o\d+: token 5 is not greater than the last grant 5/,
    );
  });

  it('a renewal succeeding after expiry by the store clock (at expiry exactly, too)', () => {
    const grant = acquire({ lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' });
    assert.equal(
      verdict(
        history(grant, renew({ lease: 'L1', token: '1', ttl: 100, at: [200, 205] }, 'renewed')),
      ),
      'violated',
    );
    // Expires at some store time in [100, 105]; a renewal sent at 105 can only land at ≥ 105.
    assert.equal(
      verdict(
        history(grant, renew({ lease: 'L1', token: '1', ttl: 100, at: [105, 110] }, 'renewed')),
      ),
      'violated',
    );
    // Exactly at expiry is too late (live means expiresAt > now), one ms before is not.
    const exact = acquire({ lease: 'L1', ttl: 100, at: [0, 0] }, { acquired: '1' });
    const at = (ms: number) =>
      renew({ lease: 'L1', token: '1', ttl: 100, at: [ms, ms] }, 'renewed');
    assert.equal(verdict(history(exact, at(100))), 'violated');
    assert.equal(verdict(history(exact, at(99))), 'ok');
    // Sent at 90 it may have landed before expiry.
    assert.equal(
      verdict(
        history(grant, renew({ lease: 'L1', token: '1', ttl: 100, at: [90, 110] }, 'renewed')),
      ),
      'ok',
    );
  });

  it('a renewal answered lost while the lease was held and live', () => {
    const h = history(
      acquire({ lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '1' }),
      renew({ lease: 'L1', token: '1', ttl: 1000, at: [10, 15] }, 'lost'),
    );
    assert.equal(verdict(h), 'violated');
  });

  it('a release by a stale owner taking effect: answered released, or freeing the key as :info', () => {
    const takeover = [
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' }),
      acquire({ proc: 'B', lease: 'L2', ttl: 1000, at: [200, 205] }, { acquired: '2' }),
    ];
    const released = history(
      ...takeover,
      release({ proc: 'A', lease: 'L1', token: '1', at: [300, 305] }, 'released'),
    );
    assert.equal(verdict(released), 'violated');
    assert.match(
      formatReport(checkHistory(released)),
      /released, but L1 did not hold the key \(L2 did\)/,
    );
    // The stale release is :info; C's grant while B is live cannot be explained by it.
    const freed = history(
      ...takeover,
      release({ proc: 'A', lease: 'L1', token: '1', at: [300] }, undefined),
      acquire({ proc: 'C', lease: 'L3', ttl: 1000, at: [400, 405] }, { acquired: '3' }),
    );
    assert.equal(verdict(freed), 'violated');
    const refused = history(
      ...takeover,
      release({ proc: 'A', lease: 'L1', token: '1', at: [300, 305] }, 'not_owner'),
    );
    assert.equal(verdict(refused), 'ok');
  });

  it('a release answered not_owner for the live holder', () => {
    const h = history(
      acquire({ lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '1' }),
      release({ lease: 'L1', token: '1', at: [10, 15] }, 'not_owner'),
    );
    assert.equal(verdict(h), 'violated');
  });

  it('an :info acquire that is then contradicted', () => {
    // L1's acquire timed out. Its holder later renews L1 with token 1 — so the grant happened —
    // but B was granted token 2 in between while L1 would have been live.
    const renewed = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 1000, at: [0] }, undefined),
      acquire({ proc: 'B', lease: 'L2', ttl: 1000, at: [10, 15] }, { acquired: '2' }),
      renew({ proc: 'A', lease: 'L1', token: '1', ttl: 1000, at: [20, 25] }, 'renewed'),
    );
    assert.equal(verdict(renewed), 'violated');
    // B's busy answer proves the lost grant happened (nothing else held the key), so C's
    // token must be above it: 1 is not.
    const ghost = [
      acquire({ proc: 'A', lease: 'L1', ttl: 10, at: [0, 1] }, 'info'),
      acquire({ proc: 'B', lease: 'L2', at: [5, 8] }, 'busy'),
    ];
    const none: LinearizabilityOptions = { initialHolder: 'none' };
    assert.equal(
      verdict(history(...ghost, acquire({ lease: 'L3', at: [30, 35] }, { acquired: '1' })), none),
      'violated',
    );
    assert.equal(
      verdict(history(...ghost, acquire({ lease: 'L3', at: [30, 35] }, { acquired: '2' })), none),
      'ok',
    );
  });

  it('an idempotent retry answered with another token, or busy, while its own lease is live', () => {
    const grant = acquire({ lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '1' });
    assert.equal(
      verdict(history(grant, acquire({ lease: 'L1', at: [10, 15] }, { acquired: '2' }))),
      'violated',
    );
    assert.equal(
      verdict(history(grant, acquire({ lease: 'L1', at: [10, 15] }, 'busy'))),
      'violated',
    );
    assert.equal(
      verdict(history(grant, acquire({ lease: 'L1', at: [10, 15] }, { acquired: '1' }))),
      'ok',
    );
    // After expiry the same lease id gets a new grant and a new token.
    assert.equal(
      verdict(history(grant, acquire({ lease: 'L1', at: [2000, 2005] }, { acquired: '2' }))),
      'ok',
    );
  });

  it('busy with nobody holding the key, when the key is known to start free', () => {
    const h = history(acquire({ lease: 'L1', at: [0, 5] }, 'busy'));
    assert.equal(verdict(h, { initialHolder: 'none' }), 'violated');
    // By default a holder from before the history may explain it.
    assert.equal(verdict(h), 'ok');
    const later = history(
      acquire({ lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' }),
      release({ lease: 'L1', token: '1', at: [10, 15] }, 'released'),
      acquire({ lease: 'L2', at: [20, 25] }, 'busy'),
    );
    assert.equal(verdict(later), 'violated');
  });
});

describe('I5 linearizability checker: valid histories pass', () => {
  it('concurrent acquires: the busy one invoked first is ordered after the grant', () => {
    const h = history(
      acquire({ proc: 'B', lease: 'L2', at: [0, 10] }, 'busy'),
      acquire({ proc: 'A', lease: 'L1', at: [5, 15] }, { acquired: '1' }),
    );
    assert.equal(verdict(h, { initialHolder: 'none' }), 'ok');
  });

  it('a handover chain with renewals, token gaps, expiry takeover and a stale release refused', () => {
    const h = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0, 3] }, { acquired: '7' }),
      acquire({ proc: 'B', lease: 'L2', ttl: 100, at: [1, 4] }, 'busy'),
      renew({ proc: 'A', lease: 'L1', token: '7', ttl: 100, at: [50, 52] }, 'renewed'),
      acquire({ proc: 'B', lease: 'L3', ttl: 100, at: [120, 122] }, 'busy'),
      acquire({ proc: 'B', lease: 'L4', ttl: 100, at: [160, 162] }, { acquired: '12' }),
      renew({ proc: 'A', lease: 'L1', token: '7', ttl: 100, at: [170, 171] }, 'lost'),
      release({ proc: 'A', lease: 'L1', token: '7', at: [172, 173] }, 'not_owner'),
      release({ proc: 'B', lease: 'L4', token: '12', at: [200, 202] }, 'released'),
      acquire({ proc: 'A', lease: 'L5', ttl: 100, at: [201, 210] }, { acquired: '13' }),
    );
    assert.equal(verdict(h, { initialHolder: 'none' }), 'ok');
    assert.equal(checkHistory(h).invariants.I5.status, 'ok');
  });

  it(':info acquires that did and did not take effect', () => {
    // Did: the lost grant is what B's busy answers saw; C gets the key once it expires.
    const did = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0] }, undefined),
      acquire({ proc: 'B', lease: 'L2', at: [10, 15] }, 'busy'),
      acquire({ proc: 'B', lease: 'L3', at: [50, 55] }, 'busy'),
      acquire({ proc: 'C', lease: 'L4', at: [200, 205] }, { acquired: '2' }),
    );
    // Did not: B is granted at once, A's request never arrived.
    const didNot = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0, 1] }, 'info'),
      acquire({ proc: 'B', lease: 'L2', at: [10, 15] }, { acquired: '1' }),
    );
    const none: LinearizabilityOptions = { initialHolder: 'none' };
    assert.equal(verdict(did, none), 'ok');
    assert.equal(verdict(didNot, none), 'ok');
    // And the lost grant's retry with the same lease id learns its token.
    const retried = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 1000, at: [0] }, undefined),
      acquire({ proc: 'A', lease: 'L1', ttl: 1000, at: [30, 35] }, { acquired: '4' }),
      acquire({ proc: 'B', lease: 'L2', at: [40, 45] }, 'busy'),
    );
    assert.equal(verdict(retried, none), 'ok');
  });

  it('an :info renewal that extended the lease, and one that could not have', () => {
    const base = [
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' }),
      renew({ proc: 'A', lease: 'L1', token: '1', ttl: 100, at: [50] }, undefined),
    ];
    // Busy at 120: only the lost renewal (landing in [50, 105)) keeps L1 live.
    assert.equal(verdict(history(...base, acquire({ lease: 'L2', at: [120, 125] }, 'busy'))), 'ok');
    // Busy at 300: a renewal before expiry extends L1 to < 205 at most.
    assert.equal(
      verdict(history(...base, acquire({ lease: 'L2', at: [300, 305] }, 'busy'))),
      'violated',
    );
  });

  it('a duplicated release: the copy released, the original answered not_owner', () => {
    const h = history(
      acquire({ lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '1' }),
      release({ lease: 'L1', token: '1', at: [10] }, undefined),
      release({ lease: 'L1', token: '1', at: [10, 20] }, 'not_owner'),
    );
    assert.equal(verdict(h), 'ok');
  });

  it('a release of one’s own expired lease may answer released or not_owner', () => {
    for (const answer of ['released', 'not_owner'] as const) {
      const h = history(
        acquire({ lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' }),
        release({ lease: 'L1', token: '1', at: [200, 205] }, answer),
      );
      assert.equal(verdict(h), 'ok', answer);
    }
  });

  it('keys are independent: a grant on another key is not contention', () => {
    const h = history(
      acquire({ key: 'a', lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '1' }),
      acquire({ key: 'b', lease: 'L2', ttl: 1000, at: [0, 5] }, { acquired: '1' }),
    );
    const r = checkLinearizability(h);
    assert.equal(r.status, 'ok');
    assert.deepEqual(
      r.keys.map((k) => k.key),
      ['a', 'b'],
    );
  });
});

describe('I5 linearizability checker: store time', () => {
  const takeover = (offset: number | null) =>
    history(
      acquire(
        { proc: 'A', lease: 'L1', ttl: 100, at: [0, 5], storeOffset: offset },
        { acquired: '1' },
      ),
      acquire(
        { proc: 'B', lease: 'L2', ttl: 100, at: [50, 55], storeOffset: offset },
        { acquired: '2' },
      ),
    );

  it('only differences of store time matter: any offset gives the same verdict', () => {
    assert.equal(verdict(takeover(0)), 'violated');
    assert.equal(verdict(takeover(1_000_000)), 'violated');
    assert.equal(verdict(takeover(-777)), 'violated');
  });

  it('the store clock decides: a store clock 100 ms ahead makes the same takeover valid', () => {
    const h = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' }),
      acquire(
        { proc: 'B', lease: 'L2', ttl: 100, at: [50, 55], storeOffset: 100 },
        { acquired: '2' },
      ),
    );
    assert.equal(verdict(h), 'ok');
  });

  it('without store times, expiry can explain a handover; ownership and tokens are still checked', () => {
    assert.equal(verdict(takeover(null)), 'ok');
    assert.equal(verdict(takeover(null), { storeTimeFromT: true }), 'violated');
    const meta: HistoryEvent = { type: 'meta', version: 1, storeTimeFromT: true };
    assert.equal(verdict([meta, ...takeover(null)]), 'violated');
    const stale = history(
      acquire(
        { proc: 'A', lease: 'L1', ttl: 100, at: [0, 5], storeOffset: null },
        { acquired: '1' },
      ),
      acquire(
        { proc: 'B', lease: 'L2', ttl: 100, at: [50, 55], storeOffset: null },
        { acquired: '2' },
      ),
      release({ proc: 'A', lease: 'L1', token: '1', at: [60, 65], storeOffset: null }, 'released'),
    );
    assert.equal(verdict(stale), 'violated');
    const r = checkHistory(stale);
    assert.match(r.invariants.I5.violations[0]!.message, /released, but L1 did not hold the key/);
  });

  it('timeToleranceMs widens the windows', () => {
    const h = history(
      acquire({ lease: 'L1', ttl: 100, at: [0, 0] }, { acquired: '1' }),
      acquire({ lease: 'L2', ttl: 100, at: [95, 95] }, { acquired: '2' }),
    );
    assert.equal(checkHistory(h).invariants.I5.status, 'violated');
    assert.equal(checkHistory(h, { timeToleranceMs: 5 }).invariants.I5.status, 'ok');
  });
});

describe('I5 in the history checker and format', () => {
  it('reports not checked for histories without store_op records (old histories still check)', () => {
    const old: HistoryEvent[] = [
      { type: 'meta', version: 1, t: 0 },
      { type: 'acquire', phase: 'invoke', t: 0, proc: 'A', op: 'a1', key: 'job' },
      { type: 'acquire', phase: 'ok', t: 1, proc: 'A', op: 'a1', key: 'job', token: '1' },
    ];
    const r = checkHistory(old);
    assert.equal(r.invariants.I5.status, 'not_checked');
    assert.equal(r.valid, true);
    assert.match(
      formatReport(r),
      /I5 linearizable acquire\/renew\/release: not checked \(no store_op records\)/,
    );
  });

  it('answers unknown, not a verdict, when the step budget runs out', () => {
    const ops: StoreOpEvent[][] = [];
    for (let i = 0; i < 12; i++)
      ops.push(acquire({ proc: `X${i}`, lease: `G${i}`, ttl: 10, at: [i] }, undefined));
    ops.push(acquire({ lease: 'L1', ttl: 1000, at: [100, 101] }, { acquired: '50' }));
    ops.push(acquire({ lease: 'L2', ttl: 1000, at: [200, 201] }, { acquired: '51' }));
    const h = history(...ops);
    // Twelve interchangeable lost grants are tried once each, not in every order.
    const full = checkLinearizability(h);
    assert.equal(full.status, 'violated');
    assert.ok(full.steps < 5000, `${full.steps} steps`);
    const r = checkHistory(h, { linearizability: { maxStepsPerKey: 5 } });
    assert.equal(r.invariants.I5.status, 'unknown');
    assert.equal(r.valid, true);
    assert.match(formatReport(r), /I5 .*: UNKNOWN \(budget exceeded on key\(s\) job/);
    assert.match(formatReport(r), /verdict: VALID .*\(I5 unknown: search budget exceeded\)/);
  });

  it('narrows the counterexample to the first answer with no linearization', () => {
    const h = history(
      acquire({ proc: 'A', lease: 'L1', ttl: 100, at: [0, 5] }, { acquired: '1' }),
      release({ proc: 'A', lease: 'L1', token: '1', at: [10, 15] }, 'released'),
      acquire({ proc: 'B', lease: 'L2', ttl: 100, at: [20, 25] }, { acquired: '2' }),
      acquire({ proc: 'C', lease: 'L3', ttl: 100, at: [30, 40] }, 'busy'),
      acquire({ proc: 'C', lease: 'L4', ttl: 100, at: [50, 60] }, { acquired: '3' }),
      release({ proc: 'B', lease: 'L2', token: '2', at: [500, 505] }, 'not_owner'),
      acquire({ proc: 'D', lease: 'L5', ttl: 100, at: [600, 605] }, { acquired: '9' }),
    );
    const r = checkLinearizability(h);
    const key = r.keys[0]!;
    assert.equal(key.status, 'violated');
    if (key.status !== 'violated') return;
    const c = key.counterexample;
    assert.equal(c.culprit.lease, 'L4');
    assert.equal(c.culprit.granted, 3n);
    assert.deepEqual([c.from, c.to], [50, 60]);
    assert.deepEqual(
      c.before.map((o) => o.lease),
      ['L1', 'L2', 'L3'],
    );
    assert.ok(
      c.reasons.some((w) => /held live by L2/.test(w)),
      c.reasons.join('; '),
    );
  });

  it('reports violations as expected under faults where the store loses state', () => {
    const h: HistoryEvent[] = [
      ...history(
        acquire({ lease: 'L1', ttl: 1000, at: [0, 5] }, { acquired: '3' }),
        acquire({ lease: 'L2', ttl: 1000, at: [100, 105] }, { acquired: '2' }),
      ),
      { type: 'fault', t: 50, fault: 'failover' },
    ];
    const r = checkHistory(h);
    assert.equal(r.invariants.I5.status, 'expected');
    assert.equal(r.valid, true);
    // A store clock jumping forward excuses nothing: by its own clock it must still be a lease.
    const jump = [...h.slice(0, -1), { type: 'fault', t: 50, fault: 'store_clock_jump' } as const];
    assert.equal(checkHistory(jump).invariants.I5.status, 'violated');
  });

  it('parses store_op lines and refuses malformed ones', () => {
    const good = [
      '{"type":"store_op","phase":"invoke","f":"acquire","t":0,"proc":"A","op":"o1","key":"job","lease":"L1","ttlMs":1000,"storeAt":7}',
      '{"type":"store_op","phase":"acquired","f":"acquire","t":3,"proc":"A","op":"o1","key":"job","token":"33","storeAt":9}',
      '{"type":"store_op","phase":"invoke","f":"release","t":5,"proc":"A","op":"o2","key":"job","lease":"L1","token":"33"}',
      '{"type":"store_op","phase":"info","f":"release","t":6,"proc":"A","op":"o2","key":"job","error":"timeout"}',
    ].join('\n');
    assert.equal(parseHistory(good).length, 4);
    assert.equal(checkLinearizability(parseHistory(good)).status, 'ok');
    const bad = [
      [
        '"phase":"renewed","f":"acquire","t":1,"proc":"A","op":"o1","key":"k"',
        /"phase" of a acquire/,
      ],
      ['"phase":"invoke","f":"acquire","t":1,"proc":"A","op":"o1","key":"k","ttlMs":5', /"lease"/],
      [
        '"phase":"invoke","f":"renew","t":1,"proc":"A","op":"o1","key":"k","lease":"L","ttlMs":5',
        /"token"/,
      ],
      [
        '"phase":"invoke","f":"acquire","t":1,"proc":"A","op":"o1","key":"k","lease":"L"',
        /"ttlMs"/,
      ],
      [
        '"phase":"invoke","f":"acquire","t":1,"proc":"A","op":"o1","key":"k","lease":"L","ttlMs":0',
        /positive/,
      ],
      [
        '"phase":"acquired","f":"acquire","t":1,"proc":"A","op":"o1","key":"k","token":7',
        /"token"/,
      ],
      ['"phase":"invoke","f":"grab","t":1,"proc":"A","op":"o1","key":"k"', /"f"/],
    ] as const;
    for (const [fields, re] of bad)
      assert.throws(() => parseHistory(`{"type":"store_op",${fields}}`), re, fields);
  });
});
