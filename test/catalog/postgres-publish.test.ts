import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../src/core/errors.js';
import { PostgresPointerStore } from '../../src/fencing/catalog/pointers/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { stagedPostgresRow } from './pointers.js';

// The publish statement of pointer store version 5 (decision 025): one scalar call that
// bounds its own lock waits by the store's timeout, and that writes exactly what version 4's
// function writes, so processes of either version can publish to one catalog.

const KEY = 'report/publish';
const P = 'leasehold_catalog';

describe('PostgreSQL catalog publish (version 5 function)', () => {
  const schema = uniqueSchema('catalog_pub');
  const t = (s: string): string => `"${schema}".${P}_${s}`;
  let pool: pg.Pool;
  let store: PostgresPointerStore;

  /** A complete staged registry row, as stage() leaves it. */
  function staged(name: string, token: bigint): Promise<string> {
    return stagedPostgresRow(pool, t('object'), name, token);
  }

  function publish(name: string, handle: string, token: bigint, idempotencyKey?: string) {
    return store.publish({
      name,
      handle,
      token,
      leaseKey: KEY,
      leaseId: 'lease',
      expectedVersion: undefined,
      idempotencyKey,
    });
  }

  /** A publish the way a version-4 process makes it: the SET LOCAL timeouts, then the v3 function. */
  async function oldPublish(name: string, handle: string, token: bigint): Promise<string> {
    const r = await pool.query<{ version: string }>(
      `SELECT version::text FROM ${t('publish_v3')}($1, $2, $3::bigint, $4, 'lease', NULL, NULL, false)`,
      [name, handle, token.toString(), KEY],
    );
    return r.rows[0]!.version;
  }

  before(async () => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 3 });
    await pool.query(`CREATE SCHEMA "${schema}"`);
    store = new PostgresPointerStore({
      connectionString: PG_URL,
      schema,
      maxConnections: 2,
      timeout: '300ms',
    });
    // The first use runs the migrations.
    assert.equal(await store.pointer('reports/x'), undefined);
  });

  after(async () => {
    await store?.close();
    await pool?.end();
    await dropSchema(schema);
  });

  it('answers the new version and the handle shown before, on the common and the full path', async () => {
    const h1 = await staged('reports/a', 3n);
    const first = await publish('reports/a', h1, 3n);
    assert.deepEqual(first, { status: 'applied', version: 1, previousHandle: undefined });
    const h2 = await staged('reports/a', 3n);
    const second = await publish('reports/a', h2, 3n);
    assert.deepEqual(second, { status: 'applied', version: 2, previousHandle: h1 });
    // An idempotency key takes the full path (version 4's decision), same answer shape.
    const h3 = await staged('reports/a', 4n);
    const keyed = await publish('reports/a', h3, 4n, 'op-1');
    assert.deepEqual(keyed, { status: 'applied', version: 3, previousHandle: h2 });
    assert.deepEqual(await publish('reports/a', h3, 4n, 'op-1'), {
      status: 'duplicate',
      version: 3,
    });
    assert.deepEqual(await publish('reports/a', await staged('reports/a', 2n), 2n), {
      status: 'stale_fence',
      highWaterMark: 4n,
    });
  });

  it('a version-4 process and this one publish to one catalog: one version sequence, one history', async () => {
    const name = 'reports/mixed';
    const versions: string[] = [];
    for (let i = 0; i < 6; i++) {
      const handle = await staged(name, 7n);
      if (i % 2 === 0) {
        versions.push(await oldPublish(name, handle, 7n));
      } else {
        const r = await publish(name, handle, 7n);
        assert.equal(r.status, 'applied');
        versions.push(String(r.status === 'applied' && r.version));
      }
    }
    assert.deepEqual(versions, ['1', '2', '3', '4', '5', '6']);
    const history = await store.history(name, 10);
    assert.deepEqual(
      history.map((e) => e.version),
      [6, 5, 4, 3, 2, 1],
    );
    // Every handle but the visible one is unreferenced, so the collector may take it later.
    const open = await pool.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM ${t('object')} WHERE name = $1 AND unreferenced_at IS NULL`,
      [name],
    );
    assert.equal(open.rows[0]!.n, '1');
  });

  for (const path of ['common', 'full'] as const) {
    it(`bounds a lock wait by the store's timeout (${path} path): unavailable, then applies once the lock is gone`, async () => {
      const name = `reports/locked-${path}`;
      await publish(name, await staged(name, 5n), 5n);
      const blocker = await pool.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query(`SELECT 1 FROM ${t('pointer')} WHERE name = $1 FOR UPDATE`, [name]);
        const handle = await staged(name, 5n);
        const key = path === 'full' ? 'op-locked' : undefined;
        const started = performance.now();
        await assert.rejects(publish(name, handle, 5n, key), (err: unknown) => {
          assert.ok(isLeaseholdError(err), String(err));
          assert.equal(err.code, 'ERR_UNAVAILABLE');
          return true;
        });
        // Generous bound: the 300 ms lock timeout, not the 5 s default nor a hang.
        assert.ok(performance.now() - started < 4_000);
        await blocker.query('ROLLBACK');
        const r = await publish(name, handle, 5n, key);
        assert.equal(r.status, 'applied');
        assert.equal(r.status === 'applied' && r.version, 2);
      } finally {
        blocker.release();
      }
    });
  }
});
