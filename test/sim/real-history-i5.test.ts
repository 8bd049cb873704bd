import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory, formatReport } from '../../src/check/checker.js';
import { parseHistory } from '../../src/history/parse.js';
import type { HistoryEvent, StoreOpEvent } from '../../src/history/events.js';
import { allowExpiryLag, withoutWorkerStoreTime } from '../../src/fault/store-time.js';

// I5 on histories shaped like the real-process harness's (src/fault/): per-worker op ids and
// lease labels, wall-clock-scale `t`, no `storeAt` (meta `storeTimeFromT`, tolerance 50 ms),
// etcd's `busy`/`renewed` widened by allowExpiryLag. The base history is an F1 run on SQLite as the
// harness recorded it (A holds, is stopped, B polls and takes over, A's late release fails);
// each planted wrong answer must turn I5 to `violated`, and only I5 sees it.

/** `t` of A's grant in the recorded run: histories carry wall-clock-scale times. */
const T0 = 1_795_967_571_988.9526;

type Answer = { acquired: string } | 'busy' | 'renewed' | 'lost' | 'released' | 'not_owner';

interface Op {
  readonly proc: 'A' | 'B';
  readonly n: number;
  readonly f: StoreOpEvent['f'];
  readonly lease: string;
  readonly token?: string;
  readonly ttlMs?: number;
  /** Invocation and answer, ms after T0; no answer = the worker died first (`:info`). */
  readonly at: readonly [number, number?];
  readonly answer?: Answer;
}

function events(op: Op): StoreOpEvent[] {
  const base = {
    type: 'store_op',
    f: op.f,
    proc: op.proc,
    key: 'job',
    op: `${op.proc}-o${op.n}`,
  } as const;
  const invoke: StoreOpEvent = {
    ...base,
    phase: 'invoke',
    t: T0 + op.at[0],
    lease: op.lease,
    ...(op.token === undefined ? {} : { token: op.token }),
    ...(op.f === 'release' ? {} : { ttlMs: op.ttlMs ?? 1000 }),
  };
  if (op.answer === undefined) return [invoke];
  const a = op.answer;
  return [
    invoke,
    {
      ...base,
      t: T0 + (op.at[1] ?? op.at[0]),
      ...(typeof a === 'object' ? { phase: 'acquired', token: a.acquired } : { phase: a }),
    },
  ];
}

/** The F1 run (SQLite, TTL 1 s) as the harness recorded it, times rounded to 0.1 ms. */
function f1Run(): Op[] {
  return [
    { proc: 'A', n: 1, f: 'acquire', lease: 'A-L1', at: [0, 1.8], answer: { acquired: '1' } },
    { proc: 'B', n: 1, f: 'acquire', lease: 'B-L1', at: [7.9, 8.8], answer: 'busy' },
    { proc: 'B', n: 2, f: 'acquire', lease: 'B-L2', at: [10.2, 10.3], answer: 'busy' },
    {
      proc: 'B',
      n: 3,
      f: 'acquire',
      lease: 'B-L3',
      at: [1008.5, 1010.8],
      answer: { acquired: '2' },
    },
    {
      proc: 'B',
      n: 4,
      f: 'renew',
      lease: 'B-L3',
      token: '2',
      at: [1261.5, 1264.9],
      answer: 'renewed',
    },
    {
      proc: 'B',
      n: 5,
      f: 'renew',
      lease: 'B-L3',
      token: '2',
      at: [1512.6, 1513.4],
      answer: 'renewed',
    },
    {
      proc: 'A',
      n: 2,
      f: 'release',
      lease: 'A-L1',
      token: '1',
      at: [1619.0, 1619.4],
      answer: 'not_owner',
    },
    {
      proc: 'B',
      n: 6,
      f: 'release',
      lease: 'B-L3',
      token: '2',
      at: [1623.2, 1624.6],
      answer: 'released',
    },
  ];
}

function history(
  ops: readonly Op[],
  widen?: (events: readonly HistoryEvent[]) => HistoryEvent[],
): HistoryEvent[] {
  const meta: HistoryEvent = {
    type: 'meta',
    version: 1,
    t: T0 - 500,
    source: 'leasehold-real',
    timeToleranceMs: 50,
    storeTimeFromT: true,
    scenario: 'F1',
    ttlMs: 1000,
  };
  const store = ops.flatMap(events).sort((a, b) => a.t - b.t);
  // Through the history's text form, as `leasehold check` reads a real run.
  const all = [meta, ...store];
  const text = (widen ? widen(all) : all).map((e) => JSON.stringify(e)).join('\n');
  return parseHistory(text);
}

/** Replaces the answer (and optionally the times) of one operation of the F1 run. */
function planted(proc: 'A' | 'B', n: number, change: Partial<Op>): Op[] {
  return f1Run().map((o) => (o.proc === proc && o.n === n ? { ...o, ...change } : o));
}

function i5(h: readonly HistoryEvent[]): { status: string; text: string; others: string[] } {
  const report = checkHistory(h);
  const others = Object.entries(report.invariants)
    .filter(([id, r]) => id !== 'I5' && r.status !== 'ok' && r.status !== 'not_checked')
    .map(([id]) => id);
  return { status: report.invariants.I5.status, text: formatReport(report), others };
}

describe('I5 on real-process-shaped histories', () => {
  it('the recorded F1 run is linearizable, with store time from t', () => {
    const r = i5(history(f1Run()));
    assert.equal(r.status, 'ok', r.text);
    assert.match(r.text, /I5 .*: ok \(8 store ops on 1 key\(s\)/);
  });

  it('a grant while A’s lease is live is a violation (and only I5 sees it)', () => {
    const ops = planted('B', 2, { answer: { acquired: '2' } }).map((o) =>
      o.proc === 'B' && o.n === 3 ? { ...o, answer: { acquired: '3' } } : o,
    );
    const r = i5(history(ops));
    assert.equal(r.status, 'violated', r.text);
    assert.match(r.text, /once B-o2 is answered/);
    assert.match(r.text, /held live by A-L1/);
    assert.deepEqual(r.others, []);
  });

  it('a grant 200 ms before A’s lease expires is a violation; 30 ms before is within tolerance', () => {
    const early = (ms: number) => planted('B', 3, { at: [1000 - ms, 1001.8 - ms] as const });
    const ok = i5(history(early(30)));
    assert.equal(ok.status, 'ok', ok.text);
    const bad = i5(history(early(200)));
    assert.equal(bad.status, 'violated', bad.text);
  });

  it('the late release answered `released` while B holds the key is a violation', () => {
    const r = i5(history(planted('A', 2, { answer: 'released' })));
    assert.equal(r.status, 'violated', r.text);
    assert.match(r.text, /once A-o2 is answered/);
  });

  it('a renewal answered `renewed` after the lease expired is a violation', () => {
    const ops = [
      ...f1Run(),
      {
        proc: 'A',
        n: 3,
        f: 'renew',
        lease: 'A-L1',
        token: '1',
        at: [1100, 1101],
        answer: 'renewed',
      } as const,
    ];
    const r = i5(history(ops));
    assert.equal(r.status, 'violated', r.text);
  });

  it('a renewal cut off by SIGKILL (no answer) may or may not have happened: still ok', () => {
    const ops = [
      ...planted('B', 3, { at: [1250, 1252] }),
      { proc: 'A', n: 3, f: 'renew', lease: 'A-L1', token: '1', at: [240] } as const,
    ];
    const r = i5(history(ops));
    assert.equal(r.status, 'ok', r.text);
    // Had it been answered `lost` while A's lease was live, that would be wrong.
    const lost = [
      ...f1Run(),
      {
        proc: 'A',
        n: 3,
        f: 'renew',
        lease: 'A-L1',
        token: '1',
        at: [240, 241],
        answer: 'lost',
      } as const,
    ];
    assert.equal(i5(history(lost)).status, 'violated');
  });

  describe('etcd: late expiry allowed for (allowExpiryLag)', () => {
    // etcd holds a key up to its session headroom and revoke lag past the TTL: B still busy
    // 1.5 s after A's 2 s lease ended is what etcd does, and must not be a violation.
    const etcdRun = (grantAt: number): Op[] => [
      {
        proc: 'A',
        n: 1,
        f: 'acquire',
        lease: 'A-L1',
        ttlMs: 2000,
        at: [0, 3],
        answer: { acquired: '7' },
      },
      {
        proc: 'B',
        n: 1,
        f: 'acquire',
        lease: 'B-L1',
        ttlMs: 2000,
        at: [3500, 3504],
        answer: 'busy',
      },
      {
        proc: 'B',
        n: 2,
        f: 'acquire',
        lease: 'B-L2',
        ttlMs: 2000,
        at: [grantAt, grantAt + 4],
        answer: { acquired: '9' },
      },
    ];
    const etcd = (all: readonly HistoryEvent[]) =>
      allowExpiryLag(all, () => 'etcd://127.0.0.1:2379?namespace=x');

    it('a late busy is explained by the lag; unwidened it would be a violation', () => {
      const widened = i5(history(etcdRun(4200), etcd));
      assert.equal(widened.status, 'ok', widened.text);
      const tight = i5(history(etcdRun(4200)));
      assert.equal(tight.status, 'violated', tight.text);
    });

    it('a busy more than the lag (2 s) past the expiry is a violation', () => {
      const ops = etcdRun(6500).map((o) =>
        o.proc === 'B' && o.n === 1 ? { ...o, at: [4200, 4204] as const } : o,
      );
      const r = i5(history(ops, etcd));
      assert.equal(r.status, 'violated', r.text);
    });

    // Grants keep their tight windows: the lag explains a key held too long, never one
    // handed out too early.
    it('a grant while A’s lease is live is still a violation', () => {
      const ops = etcdRun(1800);
      const r = i5(history(ops, etcd));
      assert.equal(r.status, 'violated', r.text);
      assert.match(r.text, /held live by A-L1/);
    });

    it('a renewal answered `renewed` after the TTL passed is still a violation', () => {
      const ops: Op[] = [
        ...etcdRun(4200).filter((o) => o.proc === 'A'),
        {
          proc: 'A',
          n: 2,
          f: 'renew',
          lease: 'A-L1',
          token: '7',
          ttlMs: 2000,
          at: [2300, 2304],
          answer: 'renewed',
        },
      ];
      const r = i5(history(ops, etcd));
      assert.equal(r.status, 'violated', r.text);
    });

    it('a busy answer after A released is still a violation', () => {
      const ops: Op[] = [
        ...etcdRun(4200).filter((o) => o.proc === 'A'),
        {
          proc: 'A',
          n: 2,
          f: 'release',
          lease: 'A-L1',
          token: '7',
          at: [100, 104],
          answer: 'released',
        },
        {
          proc: 'B',
          n: 1,
          f: 'acquire',
          lease: 'B-L1',
          ttlMs: 2000,
          at: [200, 204],
          answer: 'busy',
        },
      ];
      const r = i5(history(ops, etcd));
      assert.equal(r.status, 'violated', r.text);
    });

    it('other stores get no explicit store time; the worker’s own clock is never used', () => {
      const all = history(f1Run());
      assert.deepEqual(
        allowExpiryLag(all, () => 'redis://127.0.0.1:6379'),
        all,
      );
      const [inv] = events(f1Run()[0]!);
      assert.equal(withoutWorkerStoreTime({ ...inv!, storeAt: 1 }).storeAt, undefined);
    });
  });
});
