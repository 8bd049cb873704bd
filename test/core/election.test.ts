import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { Election, type LeaderView } from '../../src/core/election.js';
import { isLeaseholdError, LeaseholdError } from '../../src/core/errors.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type { LeaseStore, StoreRequestOptions } from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';

/** A real memory store whose renewals can be cut off, as a partition between one candidate and the store would. */
function partitionable(store: LeaseStore): { store: LeaseStore; mode: 'ok' | 'hang' | 'fail' } {
  const ctl = { store: undefined as unknown as LeaseStore, mode: 'ok' as 'ok' | 'hang' | 'fail' };
  const wrapped = Object.create(store) as LeaseStore;
  Object.assign(wrapped, {
    renew: (lease: Parameters<LeaseStore['renew']>[0], o: StoreRequestOptions) => {
      if (ctl.mode === 'hang') return new Promise<never>(() => undefined);
      if (ctl.mode === 'fail')
        return Promise.reject(new LeaseholdError('ERR_UNAVAILABLE', 'partitioned'));
      return store.renew(lease, o);
    },
  });
  ctl.store = wrapped;
  return ctl;
}

function world(): {
  clock: ManualClock;
  client: (owner: string, store?: LeaseStore) => LeaseClient;
  store: () => MemoryLeaseStore;
} {
  const clock = new ManualClock();
  const state = new MemoryLeaseState();
  const store = (): MemoryLeaseStore => new MemoryLeaseStore({ clock, state });
  return {
    clock,
    store,
    client: (owner, s) => new LeaseClient({ store: s ?? store(), ownerId: owner, clock }),
  };
}

/** Advances virtual time in small steps until `p` settles (bounded). */
async function advanceUntil<T>(clock: ManualClock, p: Promise<T>, maxMs = 60_000): Promise<T> {
  let settled = false;
  const q = p.finally(() => {
    settled = true;
  });
  for (let t = 0; t < maxMs && !settled; t += 10) await clock.advance(10);
  assert.ok(settled, `did not settle within ${maxMs}ms of virtual time`);
  return q;
}

describe('Election on the memory store (virtual time)', () => {
  it('elects one leader at a time with strictly increasing epochs, hands over on resign, and observers see each change', async () => {
    const w = world();
    const a = w.client('a');
    const b = w.client('b');
    const o = w.client('observer');
    const ea = new Election({ client: a, name: 'sched', ttl: '10s', clock: w.clock });
    const eb = new Election({ client: b, name: 'sched', ttl: '10s', clock: w.clock });
    const eo = new Election({ client: o, name: 'sched', ttl: '10s', clock: w.clock });
    assert.equal(ea.key, 'election/sched');

    const views: LeaderView[] = [];
    const obs = await eo.observe((v) => views.push(v));
    assert.equal(views.length, 1, 'the current view is delivered once observing begins');
    assert.equal(views[0]!.leader, undefined);

    const ra = await ea.campaign({ value: 'a:8080' });
    assert.equal(ra.status, 'elected');
    if (ra.status !== 'elected') return;
    const la = ra.leadership;
    assert.equal(la.epoch, la.lease.token);
    assert.ok(la.isLeader());

    let bElected = false;
    const pb = eb.campaign({ value: 'b:8080' }).then((r) => {
      bElected = true;
      return r;
    });
    await w.clock.advance(5000);
    assert.equal(bElected, false, 'a second candidate waits while the first leads');
    assert.equal(views.at(-1)?.leader?.ownerId, 'a');
    assert.equal(views.at(-1)?.leader?.value, 'a:8080');
    assert.equal(views.at(-1)?.leader?.epoch, la.epoch);
    assert.equal((await eo.leader()).leader?.epoch, la.epoch);

    assert.equal((await la.resign()).status, 'released');
    assert.equal(la.signal.aborted, true, 'resigning ends leadership locally at once');
    assert.equal(la.isLeader(), false);
    const rb = await advanceUntil(w.clock, pb);
    assert.equal(rb.status, 'elected');
    if (rb.status !== 'elected') return;
    assert.ok(rb.leadership.epoch > la.epoch, 'the next epoch is greater');
    await w.clock.advance(10);

    const leaders = views.filter((v) => v.leader !== undefined).map((v) => v.leader!);
    assert.deepEqual(
      leaders.map((l) => [l.ownerId, l.epoch]),
      [
        ['a', la.epoch],
        ['b', rb.leadership.epoch],
      ],
      'the observer saw each leader once, in epoch order',
    );
    assert.equal(obs.current.leader?.value, 'b:8080');
    assert.equal(obs.current.lastEpoch, rb.leadership.epoch);

    obs.stop();
    await rb.leadership.resign();
    await Promise.all([a.close(), b.close(), o.close()]);
    assert.equal(w.clock.pendingTimers(), 0, 'no timer is left running');
  });

  it('steps down at its local deadline when renewals hang, before the store can elect the next leader', async () => {
    const w = world();
    const cut = partitionable(w.store());
    const a = w.client('a', cut.store);
    const b = w.client('b');
    const o = w.client('observer');
    const ttlMs = 3000;
    const ea = new Election({ client: a, name: 'hang', ttl: ttlMs, clock: w.clock });
    const eb = new Election({ client: b, name: 'hang', ttl: ttlMs, clock: w.clock });
    const eo = new Election({ client: o, name: 'hang', ttl: ttlMs, clock: w.clock });
    const views: LeaderView[] = [];
    const obs = await eo.observe((v) => views.push(v));

    const ra = await ea.campaign();
    assert.equal(ra.status, 'elected');
    if (ra.status !== 'elected') return;
    const la = ra.leadership;
    cut.mode = 'hang';
    let bResult: Awaited<ReturnType<Election['campaign']>> | undefined;
    const pb = eb.campaign().then((r) => (bResult = r));

    const probe = w.store();
    let atStepDown: ReturnType<LeaseStore['inspect']> | undefined;
    la.signal.addEventListener('abort', () => {
      // The memory store answers from its state at call time: at the very moment A stops,
      // does the store still count A as the leader (so nobody else can be elected yet)?
      atStepDown = probe.inspect(la.key);
    });
    let steppedAt = -1;
    for (let t = 0; t < ttlMs && steppedAt < 0; t += 10) {
      await w.clock.advance(10);
      if (la.signal.aborted) steppedAt = w.clock.now();
    }
    assert.ok(
      steppedAt > 0 && steppedAt < ttlMs,
      `A stepped down at ${steppedAt}ms, before its ttl`,
    );
    assert.ok(atStepDown !== undefined);
    assert.equal((await atStepDown).holder?.token, la.epoch, 'A still led at the store');
    assert.equal(bResult, undefined, 'B was not elected before A stepped down');
    assert.equal(
      (await eo.leader()).leader?.epoch,
      la.epoch,
      'the store still counted A as leader when A stepped down',
    );

    const rb = await advanceUntil(w.clock, pb);
    assert.equal(rb.status, 'elected');
    if (rb.status !== 'elected') return;
    assert.ok(w.clock.now() >= ttlMs, 'B was elected only after A expired at the store');
    assert.ok(rb.leadership.epoch > la.epoch);
    await w.clock.advance(10);
    assert.equal(obs.current.leader?.ownerId, 'b', 'observers see the new leader after an expiry');

    obs.stop();
    cut.mode = 'ok';
    await rb.leadership.resign();
    await la.resign();
    await Promise.all([a.close(), b.close(), o.close()]);
  });

  it("with stepDown 'first_failure', steps down at the first failed renewal and hands over at once", async () => {
    const w = world();
    const cut = partitionable(w.store());
    const a = w.client('a', cut.store);
    const b = w.client('b');
    const ea = new Election({
      client: a,
      name: 'ff',
      ttl: '30s',
      renewEvery: '1s',
      stepDown: 'first_failure',
      clock: w.clock,
    });
    const eb = new Election({ client: b, name: 'ff', ttl: '30s', clock: w.clock });
    const ra = await ea.campaign();
    assert.equal(ra.status, 'elected');
    if (ra.status !== 'elected') return;
    cut.mode = 'fail';
    const pb = eb.campaign();
    await w.clock.advance(1010);
    assert.equal(ra.leadership.signal.aborted, true, 'stepped down after the first failure');
    assert.equal(ra.leadership.lease.signal.aborted, true, 'and released its lease');
    const rb = await advanceUntil(w.clock, pb, 5000);
    assert.equal(rb.status, 'elected');
    assert.ok(w.clock.now() < 5000, 'the follower took over long before the 30 s ttl');
    if (rb.status === 'elected') await rb.leadership.resign();
    await Promise.all([a.close(), b.close()]);
  });

  it('a bounded campaign ends busy with the leader, an aborted one throws ERR_ABORTED, bad options throw ERR_INVALID_ARGUMENT', async () => {
    const w = world();
    const a = w.client('a');
    const b = w.client('b');
    const ea = new Election({ client: a, name: 'bounded', ttl: '10s', clock: w.clock });
    const eb = new Election({ client: b, name: 'bounded', ttl: '10s', clock: w.clock });
    const ra = await ea.campaign({ value: 'a' });
    assert.equal(ra.status, 'elected');
    const busy = await advanceUntil(w.clock, eb.campaign({ wait: '2s' }));
    assert.equal(busy.status, 'busy');
    if (busy.status === 'busy') assert.equal(busy.leader.value, 'a');
    const ctl = new AbortController();
    const aborted = eb.campaign({ signal: ctl.signal });
    await w.clock.advance(100);
    ctl.abort();
    await assert.rejects(aborted, (e: unknown) => isLeaseholdError(e, 'ERR_ABORTED'));
    assert.throws(
      () => new Election({ client: a, name: '', ttl: '1s' }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => new Election({ client: a, name: 'x\n', ttl: '1s' }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
    await assert.rejects(eb.campaign({ value: 'v'.repeat(2000) }), (e: unknown) =>
      isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
    if (ra.status === 'elected') await ra.leadership.resign();
    await Promise.all([a.close(), b.close()]);
  });
});
