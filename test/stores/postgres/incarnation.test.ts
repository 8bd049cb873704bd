import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { LeaseClient } from '../../../src/core/client.js';
import type { StoreRequestOptions } from '../../../src/core/store.js';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import type { IncarnationChange } from '../../../src/stores/postgres/incarnation.js';
import { advancePostgresFencingEpoch } from '../../../src/stores/postgres/epoch.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../../support/postgres.js';

// Decision 042 on one server: the row next to the lease table is rewritten to name another
// incarnation — what a promoted replica (another timeline) or a cluster restored from a dump
// (another system identifier) finds in its copy — and stores with fresh connections must
// raise the epoch before their first grant. The fault test F18 does it with a real promotion.

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

describe('PostgreSQL store: a change of incarnation raises the epoch before the next grant', () => {
  const schemas: string[] = [];
  after(async () => {
    for (const s of schemas) await dropSchema(s);
  });

  async function setup(): Promise<{ schema: string; row: string }> {
    const schema = uniqueSchema('incarn');
    schemas.push(schema);
    const m = new PostgresLeaseStore({ connectionString: PG_URL, schema });
    await m.migrate();
    await m.close();
    return { schema, row: `${quoteIdent(schema)}.coordination_lease_incarnation` };
  }

  async function holdOne(
    schema: string,
    key: string,
  ): Promise<{ leaseId: string; token: bigint; close: () => Promise<void> }> {
    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema });
    const leaseId = randomUUID();
    const r = await store.tryAcquire(
      { key, leaseId, ownerId: 'a', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal(r.status, 'acquired');
    return { leaseId, token: r.status === 'acquired' ? r.token : 0n, close: () => store.close() };
  }

  for (const [what, change, reason] of [
    ['a new timeline (promotion)', 'timeline = timeline + 7', 'failover'],
    ['another system identifier (restore)', "system_identifier = 'restored-elsewhere'", 'restore'],
  ] as const) {
    it(`${what}: 8 concurrent first grants raise it once; a lease held across is lost with reason ${reason}`, async () => {
      const { schema, row } = await setup();
      const a = await holdOne(schema, 'across');
      await a.close();
      await withPgClient((c) => c.query(`UPDATE ${row} SET ${change}`));

      const changes: IncarnationChange[] = [];
      const store = new PostgresLeaseStore({
        connectionString: PG_URL,
        schema,
        maxConnections: 8,
        onIncarnationChange: (c) => changes.push(c),
      });
      const client = new LeaseClient({ store });
      try {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => client.acquire(`k${i}`, { ttl: '10s' })),
        );
        const [{ floor, reason: recorded }] = (
          await withPgClient((c) =>
            c.query<{ floor: string; reason: string }>(`SELECT floor::text, reason FROM ${row}`),
          )
        ).rows as [{ floor: string; reason: string }];
        assert.equal(recorded, reason);
        assert.equal(changes.length, 1, 'one connection raised, the others found it raised');
        assert.deepEqual(changes[0], { reason, floor: BigInt(floor) });
        for (const r of results) {
          assert.equal(r.status, 'acquired');
          assert.ok(r.lease.token > BigInt(floor), `${r.lease.token} > ${floor}`);
        }
        assert.ok(BigInt(floor) > a.token);
        const renewed = await store.renew({ key: 'across', ...a, ttlMs: 10_000 }, OPTS());
        assert.deepEqual(renewed, { status: 'lost', reason });
        for (const r of results) if (r.status === 'acquired') await r.lease.release();
      } finally {
        await client.close();
        await store.close();
      }
    });
  }

  it('with detectIncarnation off, the next token only follows the last one (the control)', async () => {
    const { schema, row } = await setup();
    const a = await holdOne(schema, 'k');
    await a.close();
    await withPgClient((c) => c.query(`UPDATE ${row} SET timeline = timeline + 7`));
    const store = new PostgresLeaseStore({
      connectionString: PG_URL,
      schema,
      detectIncarnation: false,
    });
    try {
      const renewed = await store.renew({ key: 'k', ...a, ttlMs: 10_000 }, OPTS());
      assert.equal(renewed.status, 'renewed', 'nothing ended the lease');
      const r = await store.tryAcquire(
        { key: 'k2', leaseId: randomUUID(), ownerId: 'b', ttlMs: 10_000, value: undefined },
        OPTS(),
      );
      assert.equal(r.status, 'acquired');
      assert.equal(r.status === 'acquired' ? r.token : 0n, 1n, 'a new key starts at 1');
    } finally {
      await store.close();
    }
  });

  it('a store on an unchanged server reports no change and adds no floor', async () => {
    const { schema, row } = await setup();
    const changes: IncarnationChange[] = [];
    const store = new PostgresLeaseStore({
      connectionString: PG_URL,
      schema,
      onIncarnationChange: (c) => changes.push(c),
    });
    try {
      const r = await store.tryAcquire(
        { key: 'k', leaseId: randomUUID(), ownerId: 'b', ttlMs: 10_000, value: undefined },
        OPTS(),
      );
      assert.equal(r.status === 'acquired' ? r.token : 0n, 1n);
      assert.deepEqual(changes, []);
      const [rec] = (
        await withPgClient((c) => c.query<{ floor: string }>(`SELECT floor::text FROM ${row}`))
      ).rows;
      assert.equal(rec?.floor, '0');
    } finally {
      await store.close();
    }
  });

  it('carries a floor that `leasehold epoch` set above the clock into the next detected change', async () => {
    const { schema, row } = await setup();
    const atLeast = BigInt(Date.now()) * 1024n + 10n ** 15n; // far above the clock's floor
    const epoch = await advancePostgresFencingEpoch({ connectionString: PG_URL, schema, atLeast });
    assert.equal(epoch.floor, atLeast);
    const recorded = async (): Promise<bigint> => {
      const [r] = (
        await withPgClient((c) => c.query<{ floor: string }>(`SELECT floor::text FROM ${row}`))
      ).rows;
      return BigInt(r!.floor);
    };
    assert.equal(await recorded(), atLeast, 'the epoch recorded its floor');
    await withPgClient((c) => c.query(`UPDATE ${row} SET timeline = timeline + 1`));
    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema });
    try {
      const r = await store.tryAcquire(
        { key: 'k', leaseId: randomUUID(), ownerId: 'b', ttlMs: 10_000, value: undefined },
        OPTS(),
      );
      assert.equal(r.status, 'acquired');
      const floor = await recorded();
      assert.ok(floor > atLeast, `the new floor ${floor} exceeds the epoch's ${atLeast}`);
      assert.ok(r.status === 'acquired' && r.token > floor);
    } finally {
      await store.close();
    }
  });
});
