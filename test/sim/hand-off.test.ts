import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import type { Lease } from '../../src/core/lease.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import {
  canHandOff,
  type LeaseStore,
  type StoreAcquireRequest,
  type StoreAcquireResult,
  type StoreLeaseRef,
  type StoreReleaseResult,
  type StoreRenewResult,
  type StoreRequestOptions,
  type Unwatch,
} from '../../src/core/store.js';
import type { LeaseState } from '../../src/core/types.js';
import { checkHistory, formatReport } from '../../src/check/checker.js';
import { HistoryRecorder } from '../../src/history/recorder.js';
import { parseHistory } from '../../src/history/parse.js';
import type {
  ClientEvent,
  HistoryEvent,
  StoreEvent,
  StoreOpEvent,
} from '../../src/history/events.js';
import { checkLinearizability } from '../../src/check/linearizability.js';
import { NetworkedStore, SimNetwork } from '../../src/sim/network.js';
import { PlantedBugStore } from '../../src/sim/planted-bugs.js';
import { SimProcess } from '../../src/sim/process.js';
import { SeededRandom } from '../../src/sim/random.js';
import { runRandomSeed } from '../../src/sim/random-workload.js';
import { LeaseLabels, RecordingStore, StoreOpRecorder } from '../../src/sim/recording-store.js';
import { SimWorld } from '../../src/sim/world.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { FaultyStore } from '../support/faulty-store.js';

// Hand-off (`releaseAndAcquire`) grants a lease without a tryAcquire. These tests hold it to
// the same checks as every other grant: wrappers keep (only) the capability they wrap, the
// simulation records a hand-off as one atomic store operation, and I5 accepts a correct one
// and rejects wrong ones.

/** A store with only the base LeaseStore methods (like etcd or PostgreSQL: no hand-off). */
class BaseOnlyStore implements LeaseStore {
  constructor(private readonly inner: LeaseStore) {}
  get kind(): string {
    return this.inner.kind;
  }
  get capabilities(): LeaseStore['capabilities'] {
    return this.inner.capabilities;
  }
  tryAcquire(r: StoreAcquireRequest, o: StoreRequestOptions): Promise<StoreAcquireResult> {
    return this.inner.tryAcquire(r, o);
  }
  renew(l: StoreLeaseRef & { ttlMs: number }, o: StoreRequestOptions): Promise<StoreRenewResult> {
    return this.inner.renew(l, o);
  }
  release(l: StoreLeaseRef, o: StoreRequestOptions): Promise<StoreReleaseResult> {
    return this.inner.release(l, o);
  }
  inspect(key: string, o: StoreRequestOptions): Promise<LeaseState> {
    return this.inner.inspect(key, o);
  }
  list(prefix: string, limit: number, o: StoreRequestOptions): Promise<LeaseState[]> {
    return this.inner.list(prefix, limit, o);
  }
  watch(key: string, onChange: () => void): Promise<Unwatch> {
    return this.inner.watch(key, onChange);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe('wrappers keep the hand-off capability of the store they wrap, and only then', () => {
  const clock = new ManualClock();
  const wrappers: [string, (inner: LeaseStore) => LeaseStore][] = [
    ['ForwardingLeaseStore', (i) => new ForwardingLeaseStore(i)],
    ['FaultyStore', (i) => new FaultyStore(i)],
    [
      'RecordingStore',
      (i) => new RecordingStore(i, clock, new HistoryRecorder(), new LeaseLabels()),
    ],
    [
      'StoreOpRecorder',
      (i) => new StoreOpRecorder(i, 'p', clock, clock, new HistoryRecorder(), new LeaseLabels()),
    ],
    [
      'PlantedBugStore',
      (i) => new PlantedBugStore(i, new MemoryLeaseState(), clock, 'hand_off_reuse_token'),
    ],
    [
      'NetworkedStore',
      (i) =>
        new NetworkedStore(
          i,
          new SimNetwork(clock, new SeededRandom(1)),
          new SimProcess('p', clock),
        ),
    ],
  ];
  for (const [name, wrap] of wrappers) {
    it(`${name}: canHandOff(wrapper) === canHandOff(inner), also nested`, () => {
      const memory = new MemoryLeaseStore({ clock });
      assert.equal(canHandOff(memory), true);
      assert.equal(canHandOff(wrap(memory)), true);
      assert.equal(canHandOff(wrap(wrap(memory))), true);
      assert.equal(canHandOff(new ForwardingLeaseStore(wrap(memory))), true);
      const plain = new BaseOnlyStore(memory);
      assert.equal(canHandOff(plain), false);
      assert.equal(canHandOff(wrap(plain)), false);
      assert.equal(canHandOff(wrap(new ForwardingLeaseStore(plain))), false);
    });
  }

  it('FaultyStore can lose a hand-off reply: the release is unavailable, the waiter gets the key after the lost grant expires', async () => {
    const virtual = new ManualClock();
    const store = new FaultyStore(new MemoryLeaseStore({ clock: virtual }));
    let lost: Promise<unknown> | undefined;
    store.onHandOff = (_req, _o, forward) => {
      lost = forward(); // applied at the store …
      return new Promise(() => undefined); // … and its reply never arrives
    };
    const client = new LeaseClient({ store, clock: virtual, ownerId: 'pool', requestTimeout: 200 });
    const first = await client.acquire('k', { ttl: 1000 });
    assert.equal(first.status, 'acquired');
    const waiting = client.acquire('k', { ttl: 1000, wait: 10_000 });
    await virtual.advance(10);
    const released = (first as { lease: Lease }).lease.release();
    await virtual.advance(300);
    assert.equal((await released).status, 'unavailable');
    assert.equal(store.calls.handOff, 1);
    assert.equal(store.calls.release, 0, 'the release went by hand-off only');
    const grant = (await lost) as { acquired: StoreAcquireResult };
    assert.deepEqual(grant.acquired.status, 'acquired');
    await virtual.advance(2000);
    const second = await waiting;
    assert.equal(second.status, 'acquired');
    // Token 2 went to the grant whose answer was lost; the waiter's lease is a new one.
    assert.equal((second as { lease: Lease }).lease.token, 3n);
    await (second as { lease: Lease }).lease.release();
    await client.close();
  });
});

/** One worker, two tasks on its client: A holds `job`, B waits, A releases → hand-off. */
async function handOffWorld(options: { dropReply: boolean }) {
  const world = new SimWorld({ seed: 7, fencing: true });
  world.meta({ source: 'test', scenario: 'hand_off', ttlMs: 1000 });
  const w = world.addWorker('w1', { requestTimeoutMs: 200 });
  const outcome: { aRelease?: string; bToken?: bigint } = {};
  void (async () => {
    const a = await world.acquire(w, 'job', { ttlMs: 1000, waitMs: 0 });
    assert.ok(typeof a !== 'string');
    await w.proc.sleep(100);
    if (options.dropReply) world.network.dropNextReply('w1', 'hand_off');
    await world.release(w, a);
  })();
  void (async () => {
    await w.proc.sleep(20);
    const b = await world.acquire(w, 'job', { ttlMs: 1000, waitMs: 5000 });
    assert.ok(typeof b !== 'string');
    outcome.bToken = b.token;
    await world.release(w, b);
  })();
  await world.advance(4000);
  const { history, report } = world.finish();
  outcome.aRelease = history.find(
    (e): e is ClientEvent => e.type === 'release' && e.phase !== 'invoke' && e.token === '1',
  )?.phase;
  return { history, report, outcome };
}

const storeOps = (h: readonly HistoryEvent[], f: StoreOpEvent['f']) =>
  h.filter((e): e is StoreOpEvent => e.type === 'store_op' && e.f === f);

describe('the simulation records a hand-off as one atomic store operation', () => {
  it('one hand_off store_op (release L1/1 → grant L2/2), release and grant store events at one instant, all invariants hold', async () => {
    const { history, report, outcome } = await handOffWorld({ dropReply: false });
    assert.equal(report.valid, true, formatReport(report));
    assert.equal(report.invariants.I5.status, 'ok', formatReport(report));
    const ops = storeOps(history, 'hand_off');
    assert.equal(ops.length, 2, JSON.stringify(ops));
    const [invoke, answer] = ops as [StoreOpEvent, StoreOpEvent];
    assert.equal(invoke.phase, 'invoke');
    assert.equal(invoke.releaseLease, 'L1');
    assert.equal(invoke.releaseToken, '1');
    assert.equal(invoke.lease, 'L2');
    assert.equal(answer.phase, 'acquired');
    assert.equal(answer.token, '2');
    assert.equal(answer.released, 'released');
    // Nothing else went to the store for these two: no release of L1, no acquire by B.
    assert.equal(storeOps(history, 'release').filter((e) => e.lease === 'L1').length, 0);
    assert.equal(storeOps(history, 'acquire').filter((e) => e.phase === 'invoke').length, 1);
    const marked = history.filter((e): e is StoreEvent => e.type === 'store' && e.handOff === true);
    assert.deepEqual(
      marked.map((e) => [e.action, e.lease, e.token]),
      [
        ['released', 'L1', '1'],
        ['grant', 'L2', '2'],
      ],
    );
    assert.equal(marked[0]!.at, marked[1]!.at);
    assert.equal(report.figures.handOffs, 1);
    assert.equal(report.figures.grants, 2);
    assert.equal(outcome.aRelease, 'released');
    assert.equal(outcome.bToken, 2n);
    // The history round-trips through the format.
    assert.equal(
      parseHistory(history.map((e) => JSON.stringify(e)).join('\n')).length,
      history.length,
    );
  });

  it('a hand-off whose reply is lost is an :info store_op; the store did grant it; I5 still holds', async () => {
    const { history, report, outcome } = await handOffWorld({ dropReply: true });
    assert.equal(report.valid, true, formatReport(report));
    assert.equal(report.invariants.I5.status, 'ok', formatReport(report));
    const ops = storeOps(history, 'hand_off');
    assert.deepEqual(
      ops.map((e) => e.phase),
      ['invoke'],
      'no answer: :info',
    );
    assert.equal(report.figures.handOffs, 1, 'the store granted it');
    assert.equal(outcome.aRelease, 'unavailable');
    assert.equal(outcome.bToken, 3n, 'the waiter gets a new grant after the lost one expires');
  });
});

// Hand-written store-operation histories; the store's clock equals `t`.
let counter = 0;
function op(
  f: StoreOpEvent['f'],
  proc: string,
  at: readonly [number, number?],
  args: Partial<StoreOpEvent>,
  answer: Partial<StoreOpEvent> | undefined,
): StoreOpEvent[] {
  const id = `h${++counter}`;
  const base = { type: 'store_op', f, proc, op: id, key: 'job' } as const;
  const invoke: StoreOpEvent = { ...base, phase: 'invoke', t: at[0], storeAt: at[0], ...args };
  if (answer === undefined) return [invoke];
  const t = at[1] ?? at[0];
  return [invoke, { ...base, t, storeAt: t, phase: 'info', ...answer }];
}
const acquire = (
  proc: string,
  lease: string,
  at: [number, number],
  answer: Partial<StoreOpEvent>,
) => op('acquire', proc, at, { lease, ttlMs: 1000 }, answer);
const handOff = (
  proc: string,
  from: [string, string],
  lease: string,
  at: [number, number?],
  answer: Partial<StoreOpEvent> | undefined,
) =>
  op(
    'hand_off',
    proc,
    at,
    { lease, ttlMs: 1000, releaseLease: from[0], releaseToken: from[1] },
    answer,
  );
const history = (...ops: StoreOpEvent[][]) => ops.flat().sort((a, b) => a.t - b.t);
const lin = (h: HistoryEvent[]) => checkLinearizability(h, { initialHolder: 'none' });
const why = (h: HistoryEvent[]) =>
  formatReport(checkHistory(h, { linearizability: { initialHolder: 'none' } }));

describe('I5 on hand-offs', () => {
  const granted = acquire('A', 'L1', [0, 5], { phase: 'acquired', token: '1' });

  it('accepts a correct hand-off and the busy answers around it', () => {
    const h = history(
      granted,
      handOff('A', ['L1', '1'], 'L2', [100, 105], {
        phase: 'acquired',
        token: '2',
        released: 'released',
      }),
      acquire('B', 'L3', [102, 110], { phase: 'busy' }),
      handOff('A', ['L2', '2'], 'L4', [200, 205], {
        phase: 'acquired',
        token: '5',
        released: 'released',
      }),
    );
    assert.equal(lin(h).status, 'ok');
  });

  it('rejects a hand-off that reuses the released token', () => {
    const h = history(
      granted,
      handOff('A', ['L1', '1'], 'L2', [100, 105], {
        phase: 'acquired',
        token: '1',
        released: 'released',
      }),
    );
    assert.equal(lin(h).status, 'violated');
    assert.match(why(h), /why: h\d+: token 1 is not greater than the last grant 1/);
  });

  it('rejects released + busy: the release and the grant are one step, nothing comes between', () => {
    // Split in two steps, B's grant could fit between the release and the acquire attempt.
    const h = history(
      granted,
      handOff('A', ['L1', '1'], 'L2', [100, 110], { phase: 'busy', released: 'released' }),
      acquire('B', 'L3', [100, 110], { phase: 'acquired', token: '2' }),
    );
    assert.equal(lin(h).status, 'violated');
    assert.match(why(h), /busy, but its own release had just freed the key/);
  });

  it('rejects a grant without its release while another lease holds the key live, accepts it once that lease expired', () => {
    const stale = (at: number) =>
      history(
        granted,
        handOff('A', ['L9', '7'], 'L2', [at, at + 5], {
          phase: 'acquired',
          token: '2',
          released: 'not_owner',
        }),
      );
    assert.equal(lin(stale(100)).status, 'violated');
    assert.match(why(stale(100)), /granted while L1 held the key live/);
    assert.equal(lin(stale(1500)).status, 'ok');
  });

  it('rejects not_owner from the live holder it names', () => {
    const h = history(
      granted,
      handOff('A', ['L1', '1'], 'L2', [100, 105], { phase: 'busy', released: 'not_owner' }),
    );
    assert.equal(lin(h).status, 'violated');
    assert.match(why(h), /its release answered not_owner, but L1 held the key live with token 1/);
  });

  it('accepts a duplicated hand-off whose copy took effect first (:info), the original then an idempotent retry', () => {
    const original = () =>
      handOff('A', ['L1', '1'], 'L2', [100, 120], {
        phase: 'acquired',
        token: '2',
        released: 'not_owner',
      });
    const copy = handOff('A', ['L1', '1'], 'L2', [100], undefined);
    assert.equal(lin(history(granted, original(), copy)).status, 'ok');
    // Without the copy, not_owner from the live L1 has no explanation.
    assert.equal(lin(history(granted, original())).status, 'violated');
  });

  it('a lost hand-off may have taken effect: it explains a later grant above the next token', () => {
    const h = history(
      granted,
      handOff('A', ['L1', '1'], 'L2', [100], undefined),
      acquire('B', 'L3', [2000, 2005], { phase: 'acquired', token: '3' }),
    );
    assert.equal(lin(h).status, 'ok');
    const without = history(granted, acquire('B', 'L3', [2000, 2005], { phase: 'busy' }));
    assert.equal(lin(without).status, 'violated');
  });

  it('parses hand_off lines and refuses malformed ones', () => {
    const line = (e: object) => JSON.stringify(e);
    const invoke = {
      type: 'store_op',
      phase: 'invoke',
      f: 'hand_off',
      t: 0,
      proc: 'A',
      op: 'o1',
      key: 'job',
      lease: 'L2',
      ttlMs: 1000,
      releaseLease: 'L1',
      releaseToken: '1',
    };
    const answer = { ...invoke, phase: 'acquired', token: '2', released: 'released' };
    assert.equal(parseHistory([line(invoke), line(answer)].join('\n')).length, 2);
    assert.throws(() => parseHistory(line({ ...invoke, releaseLease: undefined })), /releaseLease/);
    assert.throws(() => parseHistory(line({ ...invoke, releaseToken: '01' })), /releaseToken/);
    assert.throws(() => parseHistory(line({ ...answer, released: undefined })), /released/);
    assert.throws(() => parseHistory(line({ ...answer, phase: 'released' })), /phase/);
  });
});

describe('the random workload hands off', () => {
  it('seeds whose workers share a client hand off; the planted hand_off_reuse_token is caught on every one of them', async () => {
    let seedsWithHandOffs = 0;
    let handOffs = 0;
    let caught = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const clean = await runRandomSeed({ seed, fencing: true });
      assert.equal(clean.report.valid, true, `seed ${seed}\n${formatReport(clean.report)}`);
      if (clean.report.figures.handOffs === 0) continue;
      seedsWithHandOffs++;
      handOffs += clean.report.figures.handOffs;
      const bug = await runRandomSeed({ seed, fencing: true, bug: 'hand_off_reuse_token' });
      if (bug.report.invariants.I2.status === 'violated') caught++;
    }
    console.log(
      `hand-off: ${handOffs} hand-offs on ${seedsWithHandOffs}/40 seeds; hand_off_reuse_token caught on ${caught}`,
    );
    assert.ok(seedsWithHandOffs >= 8, `${seedsWithHandOffs} seeds hand off`);
    assert.equal(caught, seedsWithHandOffs);
  });
});
