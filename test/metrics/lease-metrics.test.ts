import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { Registry } from 'prom-client';
import { Election, LeaseClient, isLeaseholdError, type Lease } from '../../src/index.js';
import { createLeaseMetrics } from '../../src/metrics/index.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/index.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { FaultyStore } from '../support/faulty-store.js';
import { parseExposition, valueOf, type Sample } from './exposition.js';

// ttl 1000 ms with the default drift allowance (1% + 2 ms): a lease's local deadline is 988 ms
// after its acquire (or renew) request was sent.
const TTL = 1000;
const DEADLINE = 988;

/**
 * A small app: two workers on one lease store. The store and worker B share one virtual
 * clock; worker A has its own, so the store's clock can jump ahead of A's (how a store
 * expires a lease its holder still believes in).
 */
function app() {
  const storeClock = new ManualClock();
  const clockA = new ManualClock();
  const state = new MemoryLeaseState();
  // A's connection to the store can be made to fail.
  const storeA = new FaultyStore(new MemoryLeaseStore({ clock: storeClock, state }));
  const a = new LeaseClient({
    store: storeA,
    clock: clockA,
    ownerId: 'worker-a',
  });
  const b = new LeaseClient({
    store: new MemoryLeaseStore({ clock: storeClock, state }),
    clock: storeClock,
    ownerId: 'worker-b',
  });
  const registry = new Registry();
  const metrics = createLeaseMetrics({ registry });
  const detachA = metrics.attach(a);
  const detachB = metrics.attach(b);
  const scrape = async (): Promise<Sample[]> => parseExposition(await registry.metrics());
  return { storeClock, clockA, storeA, a, b, registry, metrics, detachA, detachB, scrape };
}

function leaseOf(r: Awaited<ReturnType<LeaseClient['acquire']>>): Lease {
  assert.equal(r.status, 'acquired');
  return (r as { lease: Lease }).lease;
}

const M = {
  acq: 'leasehold_client_acquisitions_total',
  waitCount: 'leasehold_client_acquire_wait_seconds_count',
  waitSum: 'leasehold_client_acquire_wait_seconds_sum',
  heldCount: 'leasehold_client_lease_held_seconds_count',
  heldSum: 'leasehold_client_lease_held_seconds_sum',
  renewals: 'leasehold_client_renewals_total',
  slackCount: 'leasehold_client_renewal_slack_seconds_count',
  slackSum: 'leasehold_client_renewal_slack_seconds_sum',
  latencyCount: 'leasehold_client_renewal_latency_seconds_count',
  lost: 'leasehold_client_leases_lost_total',
  releases: 'leasehold_client_releases_total',
  heldNow: 'leasehold_client_leases_held',
  fence: 'leasehold_client_fence_decisions_total',
  fenceTime: 'leasehold_client_fenced_write_seconds_count',
  leader: 'leasehold_client_leader',
  leaderChanges: 'leasehold_client_leader_changes_total',
};

describe('leasehold/metrics scraped by prom-client', () => {
  it('shows each metric change as leases are acquired, renewed, lost, released and fenced', async () => {
    const { storeClock, clockA, storeA, a, b, metrics, scrape } = app();
    let s = await scrape();
    assert.equal(valueOf(s, M.acq, { result: 'acquired' }), 0);
    assert.equal(valueOf(s, M.heldNow), 0);

    // A acquires; B finds the key busy after waiting 50 ms.
    const leaseA = leaseOf(await a.acquire('report/july', { ttl: TTL, renewEvery: 300 }));
    const busy = b.acquire('report/july', { ttl: TTL, wait: 50 });
    await storeClock.advance(50);
    assert.equal((await busy).status, 'busy');
    s = await scrape();
    assert.equal(valueOf(s, M.acq, { result: 'acquired' }), 1);
    assert.equal(valueOf(s, M.acq, { result: 'busy' }), 1);
    assert.equal(valueOf(s, M.waitCount, { result: 'acquired' }), 1);
    assert.equal(valueOf(s, M.waitSum, { result: 'acquired' }), 0);
    assert.equal(valueOf(s, M.waitSum, { result: 'busy' }), 0.05, 'B waited 50 ms');
    assert.equal(valueOf(s, M.heldNow), 1);

    // A's background renewal at 300 ms: answered at once, with 988 − 300 = 688 ms left.
    await clockA.advance(300);
    s = await scrape();
    assert.equal(valueOf(s, M.renewals, { result: 'renewed' }), 1);
    assert.equal(valueOf(s, M.latencyCount), 1);
    assert.equal(valueOf(s, M.slackCount), 1);
    assert.equal(valueOf(s, M.slackSum), (DEADLINE - 300) / 1000);

    // A's connection is reset during its next renewal (at 600 ms): not confirmed, retried
    // 100 ms later.
    storeA.onRenew = () => Promise.reject(new Error('read ECONNRESET'));
    await clockA.advance(300);
    assert.equal(leaseA.status, 'held');
    s = await scrape();
    assert.equal(valueOf(s, M.renewals, { result: 'unavailable' }), 1);
    assert.equal(valueOf(s, M.slackCount), 1, 'slack is measured on confirmed renewals only');
    storeA.onRenew = undefined;

    // The store's clock jumps 2 s ahead of A's: the store expires A's lease, B takes over
    // (token 2), and A's retry is answered "lost".
    await storeClock.advance(2000);
    const leaseB = leaseOf(await b.acquire('report/july', { ttl: TTL, autoRenew: false }));
    assert.equal(leaseB.token, 2n);
    await clockA.advance(100);
    assert.equal(leaseA.status, 'lost');
    assert.equal(leaseA.lossReason, 'lost');
    s = await scrape();
    assert.equal(valueOf(s, M.acq, { result: 'acquired' }), 2);
    assert.equal(valueOf(s, M.renewals, { result: 'lost' }), 1);
    assert.equal(valueOf(s, M.lost, { reason: 'lost' }), 1);
    assert.equal(valueOf(s, M.heldCount, { end: 'lost' }), 1);
    assert.equal(valueOf(s, M.heldSum, { end: 'lost' }), 0.7, 'A held it 700 ms by its clock');
    assert.equal(valueOf(s, M.heldNow), 1, "only B's lease is held now");

    // Both write through one real SQLite fence: B's token 2 is applied, B's retry is a
    // duplicate, A's token 1 is refused, and a write that throws is timed as an error.
    const db = new Database(':memory:');
    try {
      db.exec('CREATE TABLE report (id TEXT PRIMARY KEY, body TEXT)');
      const fence = metrics.wrapFence(new SqliteFence({ database: db }));
      assert.ok(fence instanceof SqliteFence, 'the wrapped fence is still a SqliteFence');
      assert.equal(fence.constructor, SqliteFence);
      assert.equal(fence.policy, '>=');
      const put = (body: string) => (d: Database.Database) =>
        d.prepare('INSERT OR REPLACE INTO report VALUES (?, ?)').run('july', body);
      assert.equal(
        fence.apply('report/july', leaseB.token, put('B'), { opId: 'w1' }).status,
        'applied',
      );
      assert.equal(
        fence.apply('report/july', leaseB.token, put('B'), { opId: 'w1' }).status,
        'duplicate',
      );
      const stale = fence.apply('report/july', leaseA.token, put('A'));
      assert.deepEqual(stale, { status: 'stale_fence', highWaterMark: 2n });
      assert.throws(() =>
        fence.apply('report/july', leaseB.token, () => {
          throw new Error('disk full');
        }),
      );
      assert.equal(fence.highWaterMark('report/july'), 2n, 'other members pass through');
      assert.deepEqual(db.prepare('SELECT body FROM report').get(), { body: 'B' });
    } finally {
      db.close();
    }
    s = await scrape();
    assert.equal(valueOf(s, M.fence, { result: 'applied' }), 1);
    assert.equal(valueOf(s, M.fence, { result: 'duplicate' }), 1);
    assert.equal(valueOf(s, M.fence, { result: 'stale_fence' }), 1);
    assert.equal(valueOf(s, M.fenceTime, { result: 'stale_fence' }), 1);
    assert.equal(valueOf(s, M.fenceTime, { result: 'error' }), 1);

    // B never renews: its lease expires at the local deadline.
    await storeClock.advance(DEADLINE);
    assert.equal(leaseB.lossReason, 'expired');
    s = await scrape();
    assert.equal(valueOf(s, M.lost, { reason: 'expired' }), 1);
    assert.equal(valueOf(s, M.heldSum, { end: 'expired' }), DEADLINE / 1000);
    assert.equal(valueOf(s, M.heldNow), 0);

    // Releasing lost leases counts the release, never their time held a second time.
    assert.equal((await leaseA.release()).status, 'not_owner');
    await leaseB.release();
    const leaseC = leaseOf(await b.acquire('report/august', { ttl: TTL }));
    await storeClock.advance(120);
    assert.equal((await leaseC.release()).status, 'released');
    s = await scrape();
    // A's lease belongs to B at the store now; B's expired locally 12 ms before the store's
    // expiry (the drift allowance), so the store still releases it.
    assert.equal(valueOf(s, M.releases, { result: 'not_owner' }), 1);
    assert.equal(valueOf(s, M.releases, { result: 'released' }), 2);
    assert.equal(valueOf(s, M.heldCount, { end: 'lost' }), 1);
    assert.equal(valueOf(s, M.heldCount, { end: 'expired' }), 1);
    assert.equal(valueOf(s, M.heldCount, { end: 'released' }), 1, 'only lease C ended by release');
    assert.equal(valueOf(s, M.heldSum, { end: 'released' }), 0.12);

    await a.close();
    await b.close();
    assert.equal(storeClock.pendingTimers() + clockA.pendingTimers(), 0, 'no timer left');
  });

  it('labels no key, owner, lease id or token: only results, reasons and key groups', async () => {
    const { a, b, registry, metrics, storeClock } = app();
    const grouped = new Registry();
    const byGroup = createLeaseMetrics({
      registry: grouped,
      keyGroup: (key) => key.split('/')[0]!,
      maxKeyGroups: 2,
    });
    const detach = byGroup.attach(a);
    for (const key of ['alpha/1', 'beta/1', 'gamma/1', 'gamma/2']) {
      leaseOf(await a.acquire(key, { ttl: TTL }));
    }
    assert.equal((await b.acquire('alpha/1', { ttl: TTL })).status, 'busy');
    const s = parseExposition(await grouped.metrics());
    assert.equal(valueOf(s, M.acq, { result: 'acquired', key_group: 'alpha' }), 1);
    assert.equal(valueOf(s, M.acq, { result: 'acquired', key_group: 'beta' }), 1);
    assert.equal(
      valueOf(s, M.acq, { result: 'acquired', key_group: 'other' }),
      2,
      'past maxKeyGroups',
    );
    assert.equal(
      valueOf(s, M.acq, { result: 'busy', key_group: 'alpha' }),
      0,
      'B is not attached here',
    );
    assert.equal(valueOf(s, M.heldNow, { key_group: 'other' }), 2);
    for (const text of [await grouped.metrics(), await registry.metrics()]) {
      for (const secret of [
        'alpha/1',
        'gamma',
        'worker-a',
        'worker-b',
        a.heldLeases()[0]!.leaseId,
      ]) {
        assert.equal(text.includes(secret), false, `the exposition mentions ${secret}`);
      }
      const labelNames = new Set(parseExposition(text).flatMap((x) => Object.keys(x.labels)));
      labelNames.delete('le');
      const bounded = ['result', 'reason', 'end', 'key_group', 'election', 'change'];
      assert.deepEqual(
        [...labelNames].filter((l) => !bounded.includes(l)),
        [],
      );
    }
    detach();
    leaseOf(await a.acquire('beta/2', { ttl: TTL }));
    const after = parseExposition(await grouped.metrics());
    assert.equal(valueOf(after, M.acq, { result: 'acquired', key_group: 'beta' }), 1, 'detached');
    assert.equal(valueOf(after, M.heldNow, { key_group: 'beta' }), 0);
    assert.throws(
      () => createLeaseMetrics({ registry: grouped }),
      (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /keyGroup/.test(e.message),
    );
    assert.throws(
      () => createLeaseMetrics({ maxKeyGroups: 0 }),
      (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /maxKeyGroups/.test(e.message),
    );
    assert.throws(
      () => metrics.attach({} as unknown as LeaseClient),
      (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /client/.test(e.message),
    );
    assert.throws(
      () => metrics.attachElection(a, { name: 'x' } as unknown as Election),
      (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /election/.test(e.message),
    );
    assert.equal(metrics.registry, registry);
    await a.close();
    await b.close();
    assert.equal(storeClock.pendingTimers(), 0);
  });

  it('counts leadership: elected, then stepped down on resignation', async () => {
    const { b, registry, metrics, storeClock } = app();
    const election = new Election({ client: b, name: 'scheduler', ttl: TTL, clock: storeClock });
    const stop = metrics.attachElection(b, election);
    let s = parseExposition(await registry.metrics());
    assert.equal(valueOf(s, M.leader, { election: 'scheduler' }), 0);
    const r = await election.campaign({ wait: 0 });
    assert.equal(r.status, 'elected');
    s = parseExposition(await registry.metrics());
    assert.equal(valueOf(s, M.leader, { election: 'scheduler' }), 1);
    assert.equal(valueOf(s, M.leaderChanges, { election: 'scheduler', change: 'elected' }), 1);
    if (r.status === 'elected') await r.leadership.resign();
    s = parseExposition(await registry.metrics());
    assert.equal(valueOf(s, M.leader, { election: 'scheduler' }), 0);
    assert.equal(valueOf(s, M.leaderChanges, { election: 'scheduler', change: 'stepped_down' }), 1);
    stop();
    await b.close();
    assert.equal(storeClock.pendingTimers(), 0);
  });
});
