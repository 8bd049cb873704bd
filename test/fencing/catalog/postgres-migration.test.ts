import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresPointerStore } from '../../../src/fencing/catalog/pointers/postgres/index.js';
import { postgresCatalogMigrations } from '../../../src/fencing/catalog/pointers/postgres/migrate.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import { runMigrations } from '../../../src/drivers/postgres/migrate.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { stagedPostgresRow } from './pointers.js';

// A catalog made by an older leasehold (pointer store versions 1 and 2: the mark in the
// fence table, the pointer moved by the version-1 function inside a PostgresFence write) is
// migrated to version 3 on first use by the current store: the marks carry over, past
// history stays, and the old function fails closed instead of checking a mark that no longer
// moves.

const KEY = 'report/migrate';
const P = 'leasehold_catalog';

describe('PostgreSQL catalog: migration of a version-2 catalog to version 3', () => {
  const schema = uniqueSchema('catalog_mig');
  const t = (s: string): string => `"${schema}".${P}_${s}`;
  let pool: pg.Pool;
  let fence: PostgresFence;
  let store: PostgresPointerStore;

  /** A complete staged registry row, as stage() leaves it. */
  function staged(name: string, token: bigint): Promise<string> {
    return stagedPostgresRow(pool, t('object'), name, token);
  }

  /** A publish the way pointer store version 1 made it: the fence's write, then the function. */
  function oldPublish(name: string, handle: string, token: bigint): Promise<unknown> {
    return fence.write({ scope: name, token }, async (tx) => {
      const r = await tx.query<{ status: string }>(
        `SELECT status FROM "${schema}".${P}_publish($1, $2, $3, $4, 'lease', NULL, NULL)`,
        [name, handle, token.toString(), KEY],
      );
      if (r.rows[0]?.status !== 'applied') throw new Error(`old publish: ${r.rows[0]?.status}`);
      return r.rows[0].status;
    });
  }

  /** A publish request of the current store under {@link KEY}. */
  async function publishNew(
    name: string,
    token: bigint,
    expectedVersion?: number,
  ): Promise<Awaited<ReturnType<PostgresPointerStore['publish']>>> {
    return store.publish({
      name,
      handle: await staged(name, token),
      token,
      leaseKey: KEY,
      leaseId: 'lease',
      expectedVersion,
      idempotencyKey: undefined,
    });
  }

  before(async () => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    await pool.query(`CREATE SCHEMA "${schema}"`);
    fence = new PostgresFence({ pool, schema, table: `${P}_fence` });
    await fence.migrate();
    await runMigrations(pool, schema, postgresCatalogMigrations(schema, P, 2));
    // Two names published by the old code; a third fenced (mark 9) but never shown.
    for (const token of [5n, 7n])
      await oldPublish('reports/a', await staged('reports/a', token), token);
    await oldPublish('reports/b', await staged('reports/b', 4n), 4n);
    await pool.query(`INSERT INTO ${t('fence')} (scope, high_water) VALUES ('reports/c', 9)`);
    store = new PostgresPointerStore({ connectionString: PG_URL, schema, maxConnections: 2 });
  });

  after(async () => {
    await store?.close();
    await fence?.close();
    await pool?.end();
    await dropSchema(schema);
  });

  it('carries the marks over: a lower token is stale, the mark token publishes', async () => {
    const before = await store.pointer('reports/a');
    assert.equal(before?.token, 7n);
    assert.equal(before?.version, 2);
    const marks = await pool.query<{ name: string; high_water: string }>(
      `SELECT name, high_water::text FROM ${t('pointer')} ORDER BY name`,
    );
    assert.deepEqual(
      marks.rows.map((r) => [r.name, r.high_water]),
      [
        ['reports/a', '7'],
        ['reports/b', '4'],
      ],
    );
    const low = await publishNew('reports/a', 6n);
    assert.deepEqual(low, { status: 'stale_fence', highWaterMark: 7n });
    const same = await publishNew('reports/a', 7n, 2);
    assert.equal(same.status, 'applied');
    assert.equal(same.status === 'applied' && same.version, 3);
    // history(name) keeps the publishes of the old code.
    const h = await store.history('reports/a', 10);
    assert.deepEqual(
      h.map((e) => [e.version, e.token]),
      [
        [3, 7n],
        [2, 7n],
        [1, 5n],
      ],
    );
  });

  it('a mark with no pointer (fenced before the migration) still refuses lower tokens', async () => {
    const r = await publishNew('reports/c', 8n);
    assert.deepEqual(r, { status: 'stale_fence', highWaterMark: 9n });
    assert.equal(await store.pointer('reports/c'), undefined);
    const ok = await publishNew('reports/c', 9n);
    assert.equal(ok.status, 'applied');
  });

  it('the old publish fails closed after the migration: an error, the pointer unchanged', async () => {
    const handle = await staged('reports/b', 50n);
    await assert.rejects(oldPublish('reports/b', handle, 50n));
    const p = await store.pointer('reports/b');
    assert.equal(p?.token, 4n);
    assert.equal(p?.version, 1);
  });
});
