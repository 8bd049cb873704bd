import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory } from '../../src/check/checker.js';
import type { HistoryEvent, StoreEvent } from '../../src/history/events.js';
import { parseHistory, formatHistory } from '../../src/history/parse.js';
import { sweepGroupSeeds } from '../../src/sim/group-sweep.js';
import { runGroupSeed } from '../../src/sim/group-workloads.js';

// The workloads beyond one key at test size (`npm run verify` runs thousands of seeds): a
// semaphore, overlapping sets of keys, a key's lock-delay. Each must pass the checker, and
// each planted bug must be caught by the invariant written for it.

describe('sim: semaphore, sets and lock-delay workloads', () => {
  it('a semaphore: 5 seeds, no more valid holders than the limit, tokens per slot, fences per slot', async () => {
    const r = await sweepGroupSeeds({ workload: 'semaphore', count: 5 });
    assert.deepEqual(r.failures, []);
    assert.ok(r.holds > 60, `slots taken: ${r.holds}`);
    assert.equal(r.staleWritesAccepted, 0);
  });

  it('sets of keys: 5 seeds, every set reported held was wholly held', async () => {
    const r = await sweepGroupSeeds({ workload: 'sets', count: 5 });
    assert.deepEqual(r.failures, []);
    assert.ok(r.holds > 60, `sets held: ${r.holds}`);
    assert.equal(r.staleWritesAccepted, 0);
  });

  it('lock-delay: 5 seeds, no grant inside a delay by the store clock, client clocks fast or not', async () => {
    const r = await sweepGroupSeeds({ workload: 'lock-delay', count: 5 });
    assert.deepEqual(r.failures, []);
    assert.ok(r.holds > 5, `delays started by an expiry: ${r.holds}`);
  });

  it('catches the off-by-one limit (I10), the half-held set (I11) and the delay on the client clock (I12)', async () => {
    const cases = [
      { workload: 'semaphore', bug: 'slot_limit_off_by_one', by: 'I10' },
      { workload: 'sets', bug: 'non_atomic_set', by: 'I11' },
      { workload: 'lock-delay', bug: 'lock_delay_client_clock', by: 'I12' },
    ] as const;
    for (const c of cases) {
      const r = await sweepGroupSeeds({ workload: c.workload, bug: c.bug, count: 2 });
      assert.ok((r.violatedSeeds[c.by] ?? 0) > 0, `${c.bug}: ${JSON.stringify(r.violatedSeeds)}`);
    }
  });

  it('a seed replays exactly, and its history reads back and checks the same', async () => {
    const a = await runGroupSeed({ workload: 'sets', seed: 5 });
    const b = await runGroupSeed({ workload: 'sets', seed: 5 });
    const text = formatHistory(a.history);
    assert.equal(text, formatHistory(b.history));
    assert.deepEqual(checkHistory(parseHistory(text)).invariants, a.report.invariants);
  });
});

describe('checker: the lock-delay invariant I12 on written histories', () => {
  const grant = (lease: string, token: string, at: number, extra: Partial<StoreEvent> = {}) =>
    ({
      type: 'store',
      op: `s-${lease}`,
      action: 'grant',
      at,
      t: at,
      key: 'job',
      lease,
      token,
      expiresAt: at + 1000,
      ...extra,
    }) as StoreEvent;
  const i12 = (events: HistoryEvent[]) => checkHistory(events).invariants.I12.status;

  it('refuses a grant 500ms after an expiry with a 2s lock-delay', () => {
    assert.equal(
      i12([grant('L1', '1', 0, { lockDelayMs: 2000 }), grant('L2', '2', 1500)]),
      'violated',
    );
  });

  it('accepts it once the delay has passed, when the grant skipped it, or after a release', () => {
    assert.equal(i12([grant('L1', '1', 0, { lockDelayMs: 2000 }), grant('L2', '2', 3000)]), 'ok');
    assert.equal(
      i12([
        grant('L1', '1', 0, { lockDelayMs: 2000 }),
        grant('L2', '2', 1500, { ignoreLockDelay: true }),
      ]),
      'ok',
    );
    const release: StoreEvent = {
      type: 'store',
      op: 'r1',
      action: 'released',
      at: 1200,
      t: 1200,
      key: 'job',
      lease: 'L1',
      token: '1',
    };
    assert.equal(
      i12([grant('L1', '1', 0, { lockDelayMs: 2000 }), release, grant('L2', '2', 1500)]),
      'ok',
    );
  });
});
