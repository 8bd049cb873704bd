import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import type { LeaseEvent } from '../../src/core/events.js';
import type { Lease } from '../../src/core/lease.js';
import {
  BatchedRenewal,
  MAX_RENEWALS_PER_CALL,
  onGrid,
  RENEWAL_GATHER_MS,
  RenewalBatcher,
  renewalGridMs,
} from '../../src/core/renewal-batch.js';
import { TimeoutQueue } from '../../src/core/runtime/timeout-queue.js';
import type {
  BatchRenewingLeaseStore,
  StoreRenewManyResult,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
} from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { tempDir } from '../support/tmp.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

/**
 * The memory store with `renewMany` (each lease renewed as `renew` would, in one call),
 * counting its round trips; `failNext` makes the next calls throw. The memory store itself
 * renews one lease per call: in one process a call costs nothing to save.
 */
class CountingStore extends MemoryLeaseStore implements BatchRenewingLeaseStore {
  renewCalls = 0;
  renewManyCalls: Array<{ at: number; size: number }> = [];
  failNext = 0;
  /** Keys whose renewals this store answers `unanswered` (as a 403 inside a batch is). */
  refused = new Set<string>();
  constructor(
    private readonly clockRef: ManualClock,
    state: MemoryLeaseState,
  ) {
    super({ clock: clockRef, state });
  }
  override renew(
    lease: StoreRenewRequest,
    options?: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.renewCalls++;
    return super.renew(lease, options);
  }
  renewMany(
    leases: readonly StoreRenewRequest[],
    options?: StoreRequestOptions,
  ): Promise<readonly StoreRenewManyResult[]> {
    this.renewManyCalls.push({ at: this.clockRef.now(), size: leases.length });
    if (this.failNext > 0) {
      this.failNext--;
      return Promise.reject(new Error('connection reset'));
    }
    return Promise.all(
      leases.map((lease): Promise<StoreRenewManyResult> =>
        this.refused.has(lease.key)
          ? Promise.resolve({ status: 'unanswered', error: new Error('permission_denied') })
          : super.renew(lease, options),
      ),
    );
  }
}

const TTL = 10_000;
const EVERY = Math.floor(TTL / 3);

function setup(): {
  clock: ManualClock;
  state: MemoryLeaseState;
  store: CountingStore;
  client: LeaseClient;
} {
  const clock = new ManualClock({ startMs: 1_000 });
  const state = new MemoryLeaseState();
  const store = new CountingStore(clock, state);
  const client = new LeaseClient({ store, clock, ownerId: 'many' });
  return { clock, state, store, client };
}

/** Acquires `n` leases spread over one renewal interval, in virtual time. */
async function acquireSpread(client: LeaseClient, clock: ManualClock, n: number): Promise<Lease[]> {
  const leases: Lease[] = [];
  for (let i = 0; i < n; i++) {
    const r = await client.acquire(`tenant/${i}`, { ttl: TTL, renewEvery: EVERY });
    assert.equal(r.status, 'acquired');
    leases.push((r as { lease: Lease }).lease);
    await clock.advance(EVERY / n);
  }
  return leases;
}

describe('renewals in batches (a store with renewMany)', () => {
  it('renews 10,000 leases with about eight store calls per renewal interval, and keeps every one', async () => {
    const { clock, store, client } = setup();
    const leases = await acquireSpread(client, clock, 10_000);
    const from = clock.now();
    store.renewManyCalls = [];
    const intervals = 3;
    await clock.advance(intervals * EVERY);
    assert.equal(store.renewCalls, 0, 'no renewal went out on its own');
    for (let k = 0; k < intervals; k++) {
      const calls = store.renewManyCalls.filter(
        (c) => c.at >= from + k * EVERY && c.at < from + (k + 1) * EVERY,
      );
      // Eight grid lines per interval, plus one for a line the interval's edge cuts in two.
      assert.ok(calls.length <= 9, `interval ${k}: ${calls.length} calls`);
      assert.ok(calls.length >= 1, `interval ${k}: renewals went out`);
      for (const c of calls) assert.ok(c.size <= MAX_RENEWALS_PER_CALL);
      const renewed = calls.reduce((n, c) => n + c.size, 0);
      // Each lease renews about once per interval: a renewal is up to a grid line (an eighth
      // of the interval) early, never late.
      assert.ok(
        renewed >= leases.length && renewed <= leases.length * 1.15,
        `interval ${k}: ${renewed} renewals of ${leases.length} leases`,
      );
    }
    for (const l of leases) assert.equal(l.status, 'held', `${l.key} still held`);
    await client.close();
  });

  it('a lost lease in a batch ends alone; the others renew', async () => {
    const { clock, state, store, client } = setup();
    const leases = await Promise.all(
      [0, 1, 2, 3].map(async (i) => {
        const r = await client.acquire(`job/${i}`, { ttl: TTL, renewEvery: EVERY });
        assert.equal(r.status, 'acquired');
        return (r as { lease: Lease }).lease;
      }),
    );
    // An operator clears one lock behind its holder's back.
    state.rows.get('job/2')!.leaseId = undefined;
    await clock.advance(EVERY + 10);
    assert.equal(store.renewManyCalls.length, 1, 'the four renewals went out as one call');
    assert.equal(store.renewManyCalls[0]!.size, 4);
    assert.deepEqual(
      leases.map((l) => l.status),
      ['held', 'held', 'lost', 'held'],
    );
    assert.equal(leases[2]!.lossReason, 'lost');
    await client.close();
  });

  it("renew() called by a 'renewed' listener during a background renewal gets that renewal's answer", async () => {
    const { clock, store, client } = setup();
    const r = await client.acquire('job/listener', { ttl: TTL, renewEvery: EVERY });
    assert.equal(r.status, 'acquired');
    const lease = (r as { lease: Lease }).lease;
    const asked: Array<Promise<unknown>> = [];
    client.on('renewed', () => {
      if (asked.length === 0) asked.push(lease.renew());
    });
    const calls = store.renewManyCalls.length;
    await clock.advance(EVERY + 10);
    assert.equal(asked.length, 1, 'the background renewal was applied');
    assert.deepEqual(await asked[0], { status: 'renewed', deadline: lease.deadline });
    assert.equal(store.renewManyCalls.length, calls + 1, 'no second call for it');
    await client.close();
  });

  it('a failed call is a failed renewal for each lease: each retries and keeps its lease', async () => {
    const { clock, store, client } = setup();
    const events: LeaseEvent[] = [];
    client.on('renew_failed', (e) => events.push(e));
    const leases = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const r = await client.acquire(`job/${i}`, { ttl: TTL, renewEvery: EVERY });
        assert.equal(r.status, 'acquired');
        return (r as { lease: Lease }).lease;
      }),
    );
    store.failNext = 1;
    await clock.advance(EVERY + 10);
    assert.equal(events.length, 3, 'each lease saw its renewal fail');
    const before = store.renewManyCalls.length;
    await clock.advance(TTL / 5);
    assert.ok(store.renewManyCalls.length > before, 'the retries went out');
    for (const l of leases) assert.equal(l.status, 'held');
    for (const l of leases) assert.ok(l.deadline > clock.now() + TTL / 2, 'renewed by the retry');
    await client.close();
  });

  it("one lease's own error in a call fails only that renewal; the others renew", async () => {
    const { clock, store, client } = setup();
    const failed: LeaseEvent[] = [];
    client.on('renew_failed', (e) => failed.push(e));
    const leases = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const r = await client.acquire(`job/${i}`, { ttl: TTL, renewEvery: EVERY });
        assert.equal(r.status, 'acquired');
        return (r as { lease: Lease }).lease;
      }),
    );
    store.refused.add('job/1');
    const before = leases.map((l) => l.deadline);
    await clock.advance(EVERY + 10);
    assert.equal(store.renewManyCalls.length, 1, 'the three renewals went out as one call');
    assert.deepEqual(
      failed.map((e) => (e as { key?: string }).key),
      ['job/1'],
      'only the refused lease saw its renewal fail',
    );
    assert.ok(leases[0]!.deadline > before[0]!, 'job/0 renewed');
    assert.equal(leases[1]!.deadline, before[1], 'job/1 not renewed');
    assert.ok(leases[2]!.deadline > before[2]!, 'job/2 renewed');
    for (const l of leases) assert.equal(l.status, 'held');
    await client.close();
  });

  it('a renewal whose own timeout passes fails alone; the call goes on and renews the other lease', async () => {
    const clock = new ManualClock({ startMs: 1_000 });
    const state = new MemoryLeaseState();
    const calls: Array<{ keys: string[]; options: StoreRequestOptions }> = [];
    let answer!: () => void;
    const store = new (class extends CountingStore {
      override renewMany(leases: readonly StoreRenewRequest[], options: StoreRequestOptions) {
        calls.push({ keys: leases.map((l) => l.key), options });
        // Held until the test lets it answer: the store is slow for both leases.
        return new Promise<void>((resolve) => (answer = resolve)).then(() =>
          super.renewMany(leases, options),
        );
      }
    })(clock, state);
    const client = new LeaseClient({ store, clock, ownerId: 'timeouts' });
    // Renewed by hand only, so that nothing but these two renewals reaches the store.
    const long = await client.acquire('job/long', { ttl: TTL, autoRenew: false });
    const short = await client.acquire('job/short', { ttl: 1_000, autoRenew: false });
    assert.equal(long.status, 'acquired');
    assert.equal(short.status, 'acquired');
    const longLease = (long as { lease: Lease }).lease;
    const shortLease = (short as { lease: Lease }).lease;
    const longBefore = longLease.deadline;
    const shortBefore = shortLease.deadline;
    await clock.advance(100);
    const longRenew = longLease.renew();
    const shortRenew = shortLease.renew();
    // Gathered into one call. The short lease's renewal may wait half of what is left of its
    // second (under 500 ms), the long one's the request timeout (5 s).
    await clock.advance(10);
    assert.equal(calls.length, 1, 'one call for both');
    assert.deepEqual(calls[0]!.keys.sort(), ['job/long', 'job/short']);
    await clock.advance(550);
    const shortResult = await shortRenew;
    assert.equal(shortResult.status, 'unavailable', 'the short renewal timed out');
    assert.match(
      String((shortResult as { cause: unknown }).cause),
      /did not answer within 4\d\dms/,
    );
    assert.equal(shortLease.status, 'held', 'a timed-out renewal is not a lost lease');
    assert.equal(shortLease.deadline, shortBefore, 'and it did not move the deadline');
    assert.equal(calls[0]!.options.signal.aborted, false, 'the call goes on for the other');
    answer();
    const longResult = await longRenew;
    assert.equal(longResult.status, 'renewed');
    assert.ok(longLease.deadline > longBefore, 'the long lease was renewed by the same call');
    assert.equal(shortLease.deadline, shortBefore, 'the late answer for the short one is not used');
    await client.close();
  });

  it("a timed-out renewal's late answer is not used for the lease's next renewal (renewed or lost)", async () => {
    for (const late of ['renewed', 'lost'] as const) {
      const clock = new ManualClock({ startMs: 1_000 });
      const state = new MemoryLeaseState();
      const answers: Array<(results: StoreRenewManyResult[]) => void> = [];
      const sizes: number[] = [];
      const store = new (class extends CountingStore {
        override renewMany(leases: readonly StoreRenewRequest[]) {
          sizes.push(leases.length);
          // Each call answers only when the test says so, with what the test says.
          return new Promise<StoreRenewManyResult[]>((resolve) => answers.push(resolve));
        }
      })(clock, state);
      const client = new LeaseClient({ store, clock, ownerId: 'late', requestTimeout: '1s' });
      const r = await client.acquire('job/late', { ttl: TTL, autoRenew: false });
      assert.equal(r.status, 'acquired');
      const lease = (r as { lease: Lease }).lease;
      const before = lease.deadline;
      const first = lease.renew();
      await clock.advance(1_100);
      assert.equal(answers.length, 1, 'the first renewal went out');
      assert.equal((await first).status, 'unavailable', 'and timed out');
      await clock.advance(100);
      const sentSecond = clock.now();
      const second = lease.renew();
      await clock.advance(10);
      assert.equal(answers.length, 2, 'the second renewal went out');
      // The first call answers now, while the second renewal of the same lease waits.
      answers[0]!([late === 'renewed' ? { status: 'renewed' } : { status: 'lost' }]);
      await clock.advance(1);
      assert.equal(lease.status, 'held', `a late '${late}' for the first renewal is not used`);
      assert.equal(lease.deadline, before, 'nor does it move the deadline');
      answers[1]!([{ status: 'renewed' }]);
      const result = await second;
      assert.equal(result.status, 'renewed');
      assert.ok(
        lease.deadline <= sentSecond + TTL,
        'the deadline runs from the second renewal, which the store confirmed',
      );
      assert.ok(lease.deadline > before);
      assert.deepEqual(sizes, [1, 1]);
      await client.close();
    }
  });

  it('sends a key at most once per call: a second renewal of it goes in the next call, and every renewal is answered', async () => {
    const clock = new ManualClock({ startMs: 1_000 });
    const calls: string[][] = [];
    const store = {
      renewMany(leases: readonly StoreRenewRequest[]): Promise<readonly StoreRenewManyResult[]> {
        calls.push(leases.map((l) => `${l.key} ${l.leaseId}`));
        return Promise.resolve(leases.map(() => ({ status: 'renewed' as const })));
      },
    } as unknown as BatchRenewingLeaseStore;
    const timeouts = new TimeoutQueue(clock);
    const batcher = new RenewalBatcher(store, clock, timeouts);
    const answers: string[] = [];
    const owner = {
      renewalSettled(r: BatchedRenewal, settled: { ok: boolean; value?: StoreRenewResult }): void {
        answers.push(`${r.request.leaseId} ${settled.ok ? settled.value!.status : 'failed'}`);
      },
    };
    const renewal = (key: string, leaseId: string): BatchedRenewal =>
      new BatchedRenewal({ key, leaseId, token: 1n, ttlMs: TTL }, owner);
    const submit = (...rs: BatchedRenewal[]): void => {
      for (const r of rs) {
        r.begin(1_000, clock.now(), clock.now());
        batcher.submit(r);
      }
    };
    // A lease and its local successor on one key, and a lease on another key.
    const [a, b, c] = [renewal('job/x', 'a'), renewal('job/x', 'b'), renewal('job/y', 'c')];
    submit(a, b, c);
    await clock.advance(RENEWAL_GATHER_MS);
    assert.deepEqual(calls, [['job/x a', 'job/y c']], 'the second renewal of job/x waits');
    await clock.advance(RENEWAL_GATHER_MS);
    assert.deepEqual(calls[1], ['job/x b'], 'and goes out in the next call');
    assert.deepEqual(answers.sort(), ['a renewed', 'b renewed', 'c renewed']);
    // The next renewals of the same keys meet again in one call: a key sent in an earlier
    // call is not held back.
    submit(a, c);
    await clock.advance(RENEWAL_GATHER_MS);
    assert.deepEqual(calls[2], ['job/x a', 'job/y c']);
    assert.equal(calls.length, 3);
  });

  it('puts a renewal on the grid line at or before its own due time, never after', () => {
    for (const every of [1, 7, 100, 3333, 10_000]) {
      const grid = renewalGridMs(every);
      for (const sentAt of [0, 0.5, 13.25, 999.9, 123_456.7]) {
        const due = onGrid(sentAt + every, grid);
        assert.ok(due <= sentAt + every, `due ${due} after ${sentAt + every}`);
        assert.ok(due > sentAt, `due ${due} not after the send at ${sentAt}`);
      }
    }
  });

  it('on SQLite: 1,000 leases renew in one transaction per grid line, none on its own', async () => {
    const tmp = tempDir('renew-many');
    const calls: number[] = [];
    let single = 0;
    const store = new (class extends SqliteLeaseStore {
      override renew(lease: StoreRenewRequest, options?: StoreRequestOptions) {
        single++;
        return super.renew(lease, options);
      }
      override renewMany(leases: readonly StoreRenewRequest[], options?: StoreRequestOptions) {
        calls.push(leases.length);
        return super.renewMany(leases, options);
      }
    })({ path: `${tmp.dir}/leases.db` });
    // The client's clock is virtual; the store's expiry is the machine's, and 10 s leases
    // outlast the test.
    const clock = new ManualClock({ startMs: 1_000 });
    const client = new LeaseClient({ store, clock, ownerId: 'many' });
    try {
      const leases = await acquireSpread(client, clock, 1_000);
      calls.length = 0;
      await clock.advance(2 * EVERY);
      assert.equal(single, 0, 'no renewal went out on its own');
      assert.ok(calls.length <= 18, `${calls.length} calls in two intervals`);
      const renewed = calls.reduce((n, c) => n + c, 0);
      assert.ok(renewed >= 2 * leases.length, `${renewed} renewals`);
      for (const l of leases) assert.equal(l.status, 'held', `${l.key} still held`);
      const state = await store.inspect(leases[0]!.key, {
        timeoutMs: 1000,
        signal: new AbortController().signal,
      });
      assert.equal(state.holder?.token, leases[0]!.token, 'held at the store too');
    } finally {
      await client.close();
      await store.close();
      tmp.remove();
    }
  });
});
