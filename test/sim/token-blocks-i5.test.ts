import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory, formatReport } from '../../src/check/checker.js';
import { parseHistory } from '../../src/history/parse.js';
import type { HistoryEvent, StoreOpEvent } from '../../src/history/events.js';
import {
  checkLinearizability,
  type LinearizabilityOptions,
} from '../../src/check/linearizability.js';

// Hand-written store-operation histories with token blocks (decision 007): a grant of `t`
// with `tokenBlock` `b` keeps `t` as the holder's token and every later grant must be above
// `t + b − 1`. The store's clock equals the history's `t`.

let counter = 0;
function op(
  f: StoreOpEvent['f'],
  proc: string,
  at: readonly [number, number?],
  args: Partial<StoreOpEvent>,
  answer: Partial<StoreOpEvent> | undefined,
): StoreOpEvent[] {
  const id = `b${++counter}`;
  const base = { type: 'store_op', f, proc, op: id, key: 'job' } as const;
  const invoke: StoreOpEvent = { ...base, phase: 'invoke', t: at[0], storeAt: at[0], ...args };
  if (answer === undefined) return [invoke];
  const t = at[1] ?? at[0];
  const storeAt = answer.phase === 'info' ? {} : { storeAt: t };
  return [invoke, { ...base, t, ...storeAt, phase: 'info', ...answer }];
}
const block = (b: number | undefined) => (b === undefined ? {} : { tokenBlock: b });
/** `answer`: a granted token, `busy`, `info` (lost answer), or undefined (no answer event). */
const acquire = (
  lease: string,
  at: readonly [number, number?],
  answer: string | undefined,
  options: { block?: number; ttl?: number; proc?: string } = {},
) =>
  op(
    'acquire',
    options.proc ?? lease,
    at,
    { lease, ttlMs: options.ttl ?? 1000, ...block(options.block) },
    answer === undefined
      ? undefined
      : answer === 'busy' || answer === 'info'
        ? { phase: answer }
        : { phase: 'acquired', token: answer },
  );
const renew = (lease: string, token: string, at: [number, number], answer: 'renewed' | 'lost') =>
  op('renew', lease, at, { lease, token, ttlMs: 1000 }, { phase: answer });
const release = (
  lease: string,
  token: string,
  at: [number, number],
  answer: 'released' | 'not_owner',
) => op('release', lease, at, { lease, token }, { phase: answer });
const handOff = (
  from: [string, string],
  lease: string,
  at: [number, number],
  granted: string,
  b?: number,
) =>
  op(
    'hand_off',
    from[0],
    at,
    { lease, ttlMs: 1000, releaseLease: from[0], releaseToken: from[1], ...block(b) },
    { phase: 'acquired', token: granted, released: 'released' },
  );
const history = (...ops: StoreOpEvent[][]): HistoryEvent[] => ops.flat().sort((a, b) => a.t - b.t);
const none: LinearizabilityOptions = { initialHolder: 'none' };
const lin = (h: HistoryEvent[]) => checkLinearizability(h, none).status;
const why = (h: HistoryEvent[]) => formatReport(checkHistory(h, { linearizability: none }));

describe('I5 with token blocks: the floor is the top of the last grant’s block', () => {
  // L1 is granted 5 with a block of 4 (5..8 reserved), then releases.
  const blocked = [
    acquire('L1', [0, 5], '5', { block: 4 }),
    release('L1', '5', [10, 15], 'released'),
  ];

  it('a grant inside the block (t+2) is a violation, named with the block; t+4 is not', () => {
    const inside = history(...blocked, acquire('L2', [20, 25], '7'));
    assert.equal(lin(inside), 'violated');
    const report = why(inside);
    assert.match(
      report,
      /why: b\d+: token 7 is not greater than 8, the top of the block of 4 tokens the last grant 5 reserved \(5\.\.8\)/,
    );
    assert.match(report, /acquire\(L1, ttl 1000, block 4\) → acquired 5/);
    // The top of the block itself is reserved too.
    assert.equal(lin(history(...blocked, acquire('L2', [20, 25], '8'))), 'violated');
    assert.equal(lin(history(...blocked, acquire('L2', [20, 25], '9'))), 'ok');
    assert.equal(lin(history(...blocked, acquire('L2', [20, 25], '40'))), 'ok');
  });

  it('the block holds after expiry too, and for a hand-off’s grant', () => {
    const expired = (token: string) =>
      history(acquire('L1', [0, 5], '5', { block: 4, ttl: 100 }), acquire('L2', [500, 505], token));
    assert.equal(lin(expired('6')), 'violated');
    assert.equal(lin(expired('9')), 'ok');
    const handed = (token: string) =>
      history(
        acquire('L1', [0, 5], '5', { block: 4 }),
        handOff(['L1', '5'], 'L2', [100, 105], token),
      );
    assert.equal(lin(handed('6')), 'violated');
    assert.match(why(handed('6')), /token 6 is not greater than 8, the top of the block/);
    assert.equal(lin(handed('9')), 'ok');
  });

  it('a hand-off reserves the block its acquire half asked for', () => {
    const h = (token: string) =>
      history(
        acquire('L1', [0, 5], '1'),
        handOff(['L1', '1'], 'L2', [100, 105], '2', 4),
        release('L2', '2', [110, 115], 'released'),
        acquire('L3', [120, 125], token),
      );
    assert.equal(lin(h('5')), 'violated');
    assert.match(why(h('5')), /hand_off\(release L1 token 1 → L2, ttl 1000, block 4\)/);
    assert.equal(lin(h('6')), 'ok');
  });

  it('without the field a grant is a block of 1: old histories check as before', () => {
    const old = history(
      acquire('L1', [0, 5], '5'),
      release('L1', '5', [10, 15], 'released'),
      acquire('L2', [20, 25], '6'),
    );
    assert.equal(lin(old), 'ok');
    assert.match(
      why(history(acquire('L1', [0, 5], '5'), acquire('L2', [500, 505], '5'))),
      /token 5 is not greater than the last grant 5/,
    );
  });

  it('renew and release compare the holder’s own token t, not the top of its block', () => {
    const grant = acquire('L1', [0, 5], '5', { block: 4 });
    assert.equal(lin(history(grant, renew('L1', '5', [10, 15], 'renewed'))), 'ok');
    assert.equal(lin(history(grant, renew('L1', '8', [10, 15], 'renewed'))), 'violated');
    assert.equal(lin(history(grant, renew('L1', '8', [10, 15], 'lost'))), 'ok');
    assert.equal(lin(history(grant, release('L1', '5', [10, 15], 'released'))), 'ok');
    assert.equal(lin(history(grant, release('L1', '6', [10, 15], 'released'))), 'violated');
  });

  it('an idempotent retry answers the same token and reserves nothing more', () => {
    const retried = (answer: string, next: string) =>
      history(
        acquire('L1', [0, 5], '5', { block: 4 }),
        // A retry asking for a larger block: the store keeps the first grant's block.
        acquire('L1', [10, 15], answer, { block: 8 }),
        release('L1', '5', [20, 25], 'released'),
        acquire('L2', [30, 35], next),
      );
    assert.equal(lin(retried('5', '9')), 'ok');
    assert.equal(lin(retried('5', '8')), 'violated');
    assert.equal(lin(retried('9', '13')), 'violated');
  });
});

describe('I5 with token blocks: grants whose answer was lost', () => {
  // L0 takes token 1 and releases; L1's grant (block 4) is lost; B's busy proves it took
  // effect (nothing else held the key), so it had some token g ≥ 2 and reserved g..g+3.
  const proven = [
    acquire('L0', [0, 5], '1'),
    release('L0', '1', [10, 15], 'released'),
    acquire('L1', [20, 21], 'info', { block: 4, ttl: 50 }),
    acquire('L9', [30, 35], 'busy', { proc: 'B' }),
  ];

  it('the next grant must exceed (floor + 1) + block − 1 = 5', () => {
    const h = (token: string) => history(...proven, acquire('L3', [200, 205], token));
    assert.equal(lin(h('5')), 'violated');
    assert.match(
      why(h('5')),
      /token 5 is not greater than 5: a grant above 1 whose answer was lost reserved a block of 4 tokens/,
    );
    assert.equal(lin(h('6')), 'ok');
  });

  it('is not flagged when it may never have taken effect, or once its token is known', () => {
    // Without the busy answer the lost grant may never have happened: 2 is fine.
    const maybe = history(
      acquire('L0', [0, 5], '1'),
      release('L0', '1', [10, 15], 'released'),
      acquire('L1', [20, 21], 'info', { block: 4, ttl: 50 }),
      acquire('L3', [200, 205], '2'),
    );
    assert.equal(lin(maybe), 'ok');
    // Its holder renews with token 10: the grant was 10, its block 10..13.
    const known = (token: string) =>
      history(
        ...proven,
        renew('L1', '10', [40, 45], 'renewed'),
        acquire('L3', [2000, 2005], token),
      );
    assert.equal(lin(known('13')), 'violated');
    assert.match(why(known('13')), /token 13 is not greater than 13, the top of the block of 4/);
    assert.equal(lin(known('14')), 'ok');
    // Learned by a release, then a later grant above the block.
    const released = history(
      ...proven,
      release('L1', '3', [40, 45], 'released'),
      acquire('L3', [50, 55], '7'),
    );
    assert.equal(lin(released), 'ok');
  });

  it('lost grants with blocks in a row: each raises the least floor by its block', () => {
    // Both lost grants proven by busy answers: g1 ≥ 2 reserves to ≥ 5, g2 ≥ 6 to ≥ 8.
    const h = (token: string) =>
      history(
        ...proven,
        acquire('L2', [100, 101], 'info', { block: 3, ttl: 50 }),
        acquire('L8', [110, 115], 'busy', { proc: 'C' }),
        acquire('L3', [300, 305], token),
      );
    assert.equal(lin(h('8')), 'violated');
    assert.equal(lin(h('9')), 'ok');
  });
});

describe('the store_op tokenBlock field', () => {
  const line = (fields: string) =>
    `{"type":"store_op","t":1,"proc":"A","op":"o1","key":"k",${fields}}`;
  const invoke = (f: string, extra: string) =>
    line(`"phase":"invoke","f":"${f}","lease":"L","ttlMs":5${extra}`);
  const handOffInvoke = (extra: string) =>
    invoke('hand_off', `,"releaseLease":"L0","releaseToken":"3"${extra}`);

  it('is read on acquire and hand_off invocations, from 2 to 64', () => {
    for (const text of [
      invoke('acquire', ',"tokenBlock":2'),
      invoke('acquire', ',"tokenBlock":64'),
      handOffInvoke(',"tokenBlock":16'),
    ])
      assert.equal(parseHistory(text).length, 1, text);
    const [e] = parseHistory(invoke('acquire', ',"tokenBlock":4')) as StoreOpEvent[];
    assert.equal(e!.tokenBlock, 4);
  });

  it('refuses bad values and misplaced ones like any malformed field', () => {
    const bad = [
      invoke('acquire', ',"tokenBlock":1'),
      invoke('acquire', ',"tokenBlock":0'),
      invoke('acquire', ',"tokenBlock":65'),
      invoke('acquire', ',"tokenBlock":2.5'),
      invoke('acquire', ',"tokenBlock":"4"'),
      invoke('acquire', ',"tokenBlock":null'),
      handOffInvoke(',"tokenBlock":-3'),
      line('"phase":"invoke","f":"renew","lease":"L","token":"3","ttlMs":5,"tokenBlock":4'),
      line('"phase":"acquired","f":"acquire","token":"3","tokenBlock":4'),
    ];
    for (const text of bad) assert.throws(() => parseHistory(text), /"tokenBlock"/, text);
  });
});
