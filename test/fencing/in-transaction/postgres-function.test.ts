import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type pg from 'pg';
import { LeaseClient } from '../../../src/core/client.js';
import type { Lease } from '../../../src/core/lease.js';
import { fenceIn, pgQuery } from '../../../src/fencing/in-transaction/index.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { PG_URL, withPgClient } from '../../support/postgres.js';
import { eventually } from '../../support/time.js';
import { ReportDomain, testPool } from './domain.js';

/**
 * The fence's SQL function itself: named arguments, lease validation inside the caller's
 * transaction, bad arguments, and the scope's lock shared with PostgresFence.
 */
describe("the Postgres fence's SQL function", () => {
  const domain = new ReportDomain();
  let pool: pg.Pool;
  let store: PostgresLeaseStore;
  let fence: PostgresFence;
  const fn = (): string => `"${domain.schema}".leasehold_fence`;

  before(async () => {
    await domain.setUp();
    pool = testPool(3);
    store = new PostgresLeaseStore({ connectionString: PG_URL, schema: domain.schema });
    await store.migrate();
    fence = new PostgresFence({
      pool,
      schema: domain.schema,
      leaseTable: { schema: domain.schema },
    });
  });
  after(async () => {
    await fence.close();
    await store.close();
    await pool.end();
    await domain.tearDown();
  });

  it('takes named arguments: an idempotency key answers duplicate the second time', async () => {
    const call = `SELECT ${fn()}('report/named', 5, idempotency_key => 'op-1') AS s`;
    assert.equal((await pool.query<{ s: string }>(call)).rows[0]!.s, 'applied');
    assert.equal((await pool.query<{ s: string }>(call)).rows[0]!.s, 'duplicate');
    assert.equal(await domain.mark('report/named'), 5n);
  });

  it('refuses bad arguments with SQLSTATE 22023 and changes nothing', async () => {
    for (const args of [`'report/bad', 0`, `'', 5`, `'report/bad', 5, 'x'`, `'report/bad', NULL`]) {
      await assert.rejects(
        pool.query(`SELECT ${fn()}(${args})`),
        (e: unknown) => {
          return (e as { code?: string }).code === '22023';
        },
        args,
      );
    }
    assert.equal(await domain.mark('report/bad'), 0n);
  });

  it('validates the lease in the caller’s transaction: a live lease passes, another lease id is stale', async () => {
    const client = new LeaseClient({ store, ownerId: 'fencetx' });
    const r = await client.acquire('report/leased', { ttl: 30_000, autoRenew: false });
    assert.equal(r.status, 'acquired');
    const lease = (r as { lease: Lease }).lease;
    const table = { schema: domain.schema, leaseTable: { schema: domain.schema } };
    const inTx = async (leaseId: string): Promise<unknown> => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        const answer = await fenceIn(
          pgQuery(c),
          { scope: 'report/leased', token: lease.token, lease: { key: 'report/leased', leaseId } },
          table,
        );
        await c.query(answer.status === 'applied' ? 'COMMIT' : 'ROLLBACK');
        return answer;
      } finally {
        c.release();
      }
    };
    assert.deepEqual(await inTx(lease.leaseId), { status: 'applied', value: undefined });
    assert.deepEqual(await inTx(randomUUID()), {
      status: 'stale_fence',
      highWaterMark: lease.token,
    });
    await lease.release();
    assert.equal(((await inTx(lease.leaseId)) as { status: string }).status, 'stale_fence');
    await client.close();
  });

  it("holds the scope for the caller's transaction: PostgresFence waits, then answers stale", async () => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const mine = await fenceIn(
        pgQuery(c),
        { scope: 'report/held', token: 10n },
        { schema: domain.schema },
      );
      assert.equal(mine.status, 'applied');
      const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      let settled = false;
      const other = fence
        .write({ scope: 'report/held', token: 9n }, () => assert.fail('ran'))
        .finally(() => {
          settled = true;
        });
      // The other writer is blocked by this transaction's lock on the scope's mark row.
      await eventually('PostgresFence to wait for the scope lock', () =>
        withPgClient(async (admin) => {
          const r = await admin.query(
            `SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
            [pid],
          );
          return r.rows.length > 0 ? true : undefined;
        }),
      );
      assert.equal(settled, false);
      await c.query('COMMIT');
      assert.deepEqual(await other, { status: 'stale_fence', highWaterMark: 10n });
    } finally {
      c.release();
    }
  });
});
