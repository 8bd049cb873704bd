import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isLeaseholdError } from '../../src/core/errors.js';
import { LIMITS } from '../../src/core/validate.js';
import { epochFloor, EPOCH_TOKENS_PER_MS } from '../../src/stores/epoch-floor.js';
import { EpochGate, RestoreDetector, type EpochView } from '../../src/stores/etcd/epoch.js';

const epochRecord = (base: bigint, rev: bigint): unknown[] => [
  {
    key: Buffer.from('\u0001epoch'),
    value: Buffer.from(JSON.stringify({ base: String(base), floor: '1', atMs: '1' })),
    create_revision: String(rev),
    mod_revision: String(rev),
    lease: '0',
  },
];
const view = (rev: bigint): EpochView => ({ base: 0n, rev, floor: 0n, atMs: 0n });

describe('the epoch floor', () => {
  const nowMs = 1_800_000_000_000n;

  it('is the clock × 1024 when nothing else is higher', () => {
    assert.equal(
      epochFloor({ nowMs, highest: 5n, previous: [], atLeast: 0n }),
      nowMs * EPOCH_TOKENS_PER_MS,
    );
  });

  it('exceeds the highest token still known, and --at-least', () => {
    const high = nowMs * 2048n;
    assert.equal(epochFloor({ nowMs, highest: high, previous: [], atLeast: 0n }), high + 1n);
    assert.equal(epochFloor({ nowMs, highest: 0n, previous: [], atLeast: high }), high);
  });

  it('carries an earlier floor forward at 1024 per ms, so tokens the copy never saw stay below', () => {
    const prev = { floor: 10n ** 18n, atMs: nowMs - 3000n };
    const floor = epochFloor({ nowMs, highest: 0n, previous: [prev], atLeast: 0n });
    assert.equal(floor, 10n ** 18n + 1n + 3000n * 1024n);
    // A key granted 1023 tokens every ms since that epoch is still below it.
    assert.ok(prev.floor + 3000n * 1023n < floor);
    // A clock behind the earlier epoch carries nothing forward but the floor itself.
    const behind = epochFloor({
      nowMs: prev.atMs - 10n,
      highest: 0n,
      previous: [prev],
      atLeast: 0n,
    });
    assert.equal(behind, 10n ** 18n + 1n);
  });

  it('refuses a floor that leaves no room for a grant below 2^63', () => {
    assert.throws(
      () => epochFloor({ nowMs, highest: 0n, previous: [], atLeast: LIMITS.maxToken - 10n }),
      (err: unknown) =>
        isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && /atLeast/.test(err.message),
    );
  });
});

describe('the etcd restore check', () => {
  it('refuses once the revision goes back, until an epoch written after that is read', () => {
    const d = new RestoreDetector();
    d.observe({ cluster_id: '7', revision: '100' }, d.seen);
    d.observe({ cluster_id: '7', revision: '120' }, d.seen);
    d.check(view(0n));
    d.observe({ cluster_id: '7', revision: '40' }, d.seen);
    assert.equal(d.refusing, true);
    assert.throws(
      () => d.check(view(30n)),
      (err: unknown) =>
        isLeaseholdError(err, 'ERR_UNAVAILABLE') &&
        /revision went back from 120 to 40/.test(err.message) &&
        /leasehold epoch/.test(err.message),
    );
    // Growing again (other grants) does not lift it; only a newer epoch does.
    d.observe({ cluster_id: '7', revision: '130' }, d.seen);
    assert.throws(() => d.check(view(40n)));
    d.check(view(41n));
    assert.equal(d.refusing, false);
  });

  it('does not refuse when concurrent requests answer out of order (a membership change, or members applying at different times)', () => {
    const d = new RestoreDetector();
    d.observe({ cluster_id: '7', revision: '100' }, d.seen);
    // Two requests sent when 100 was the highest seen: applied at 110 and 109, the one at 109
    // answered last (another member) — not a restore.
    const sentAt = d.seen;
    d.observe({ cluster_id: '7', revision: '110' }, sentAt);
    d.observe({ cluster_id: '7', revision: '109' }, sentAt);
    assert.equal(d.refusing, false);
    d.check(view(0n));
    // A request sent after 110 was seen that answers below it is a restore.
    d.observe({ cluster_id: '7', revision: '105' }, d.seen);
    assert.equal(d.refusing, true);
    assert.throws(() => d.check(view(0n)), /revision went back from 110 to 105/);
  });

  it('refuses when the cluster id changes', () => {
    const d = new RestoreDetector();
    d.observe({ cluster_id: '7', revision: '10' }, d.seen);
    d.observe({ cluster_id: '8', revision: '500' }, d.seen);
    assert.throws(() => d.check(view(0n)), /cluster id changed from 7 to 8/);
  });

  it('never refuses on revisions that only grow', () => {
    const gate = new EpochGate();
    for (let rev = 1n; rev < 200n; rev += 7n) {
      const v = gate.admit({ cluster_id: '1', revision: String(rev) }, [], gate.sent);
      assert.equal(v.base, 0n);
    }
    const v = gate.admit({ cluster_id: '1', revision: '300' }, epochRecord(5000n, 250n), gate.sent);
    assert.deepEqual([v.base, v.rev], [5000n, 250n]);
  });
});
