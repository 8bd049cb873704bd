import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import type { LeaseStore } from '../../src/core/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { CountingLeaseStore } from '../../src/testing/counting-store.js';
import { HARNESSES } from '../contract/harnesses/index.js';
import type { StoreHarness } from '../contract/harness.js';
import { startTestServer } from '../support/lease-server.js';
import { uniqueKey } from '../support/keys.js';
import { tempDir } from '../support/tmp.js';

/**
 * How many store round trips a client's renewals take, on every store that renews in
 * batches, counted by the same forwarder on each (CountingLeaseStore): with renewMany and
 * with one call per lease, side by side on one store in the same run. Real stores, real
 * time, generous bounds: the counts are what is asserted, never how long anything took.
 */
const LEASES = 40;
const TTL_MS = 3_000;
const EVERY_MS = 1_000;
const INTERVALS = 3;

interface Counted {
  /** Store calls per renewal interval. */
  readonly callsPerInterval: number;
  /** Leases renewed per renewal interval. */
  readonly leasesPerInterval: number;
}

/** Acquires LEASES leases spread over one interval through `store`, then counts INTERVALS. */
async function hold(
  store: CountingLeaseStore,
  label: string,
  alsoCount?: CountingLeaseStore,
): Promise<Counted> {
  const client = new LeaseClient({ store, ownerId: `round-trips-${label}` });
  const held: Lease[] = [];
  try {
    for (let i = 0; i < LEASES; i++) {
      const r = await client.acquire(uniqueKey(`round-trips-${label}-${i}`), {
        ttl: TTL_MS,
        renewEvery: EVERY_MS,
      });
      assert.equal(r.status, 'acquired');
      held.push((r as { lease: Lease }).lease);
      await new Promise((res) => setTimeout(res, EVERY_MS / LEASES));
    }
    store.reset();
    alsoCount?.reset();
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, INTERVALS * EVERY_MS));
    const intervals = (performance.now() - t0) / EVERY_MS;
    const { calls, leases } = store.counts;
    assert.deepEqual(
      held.filter((l) => l.status !== 'held').map((l) => l.key),
      [],
      'every lease stayed held',
    );
    return { callsPerInterval: calls / intervals, leasesPerInterval: leases / intervals };
  } finally {
    await client.close();
  }
}

/** Batched and one call each, at the same time over one store. */
async function compare(inner: LeaseStore): Promise<{ batched: Counted; single: Counted }> {
  assert.equal(typeof (inner as { renewMany?: unknown }).renewMany, 'function');
  const [batched, single] = await Promise.all([
    hold(new CountingLeaseStore(inner), 'batched'),
    hold(new CountingLeaseStore(inner, { batch: false }), 'single'),
  ]);
  // Each lease is renewed about once per interval either way (every EVERY_MS).
  for (const c of [batched, single]) {
    assert.ok(c.leasesPerInterval >= LEASES * 0.5, `leases renewed: ${c.leasesPerInterval}`);
  }
  assert.ok(
    single.callsPerInterval >= LEASES * 0.5,
    `one call each: ${single.callsPerInterval} calls per interval`,
  );
  // The grid has eight lines per interval; a line's timers may straddle a gather window.
  assert.ok(
    batched.callsPerInterval <= 12,
    `batched: ${batched.callsPerInterval.toFixed(1)} calls per interval for ${LEASES} leases`,
  );
  return { batched, single };
}

describe('renewal round trips per interval, batched vs one call each', { timeout: 120_000 }, () => {
  for (const name of ['sqlite', 'postgres', 'redis']) {
    it(`${name}: renewMany keeps the calls per interval at the grid's, not the leases'`, async () => {
      const harness: StoreHarness = HARNESSES[name]!();
      const store = await harness.open();
      try {
        await compare(store);
      } finally {
        await store.close();
        await harness.teardown();
      }
    });
  }

  it('http: one request per batch, which the server sends to its store as one call', async () => {
    const tmp = tempDir('round-trips');
    const atServer = new CountingLeaseStore(
      new SqliteLeaseStore({ path: join(tmp.dir, 'leases.db') }),
    );
    const server = await startTestServer({ store: atServer });
    const store = await HttpLeaseStore.connect({ url: server.url });
    try {
      // Alone first: each of the client's renewal requests is one store call at the server.
      const alone = await hold(new CountingLeaseStore(store), 'alone', atServer);
      assert.ok(alone.callsPerInterval <= 12, `${alone.callsPerInterval} requests per interval`);
      assert.ok(
        atServer.counts.calls <= Math.ceil(alone.callsPerInterval * INTERVALS) + 2,
        `the server made ${atServer.counts.calls} store calls for the renewals`,
      );
      assert.ok(atServer.counts.leases >= LEASES * INTERVALS * 0.5);
      await compare(store);
    } finally {
      await store.close();
      await server.close();
      tmp.remove();
    }
  });
});
