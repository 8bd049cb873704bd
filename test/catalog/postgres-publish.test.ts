import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../src/core/errors.js';
import { PostgresPointerStore } from '../../src/fencing/catalog/pointers/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { stagedPostgresRow } from './pointers.js';

// The publish statement of pointer store version 5 (decision 025): one scalar call that
// bounds its own lock waits by the store's timeout, and that writes exactly what version 4's
// function writes, so processes of either version can publish to one catalog. Version 6
// (decision 027): both registry rows in one statement, updated in place (no collector index).

const KEY = 'report/publish';
const P = 'leasehold_catalog';

describe('PostgreSQL catalog publish (version 5 call, version 6 function)', () => {
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

  /** The registry rows of `name`: handle → [state, referenced (unreferenced_at is NULL)]. */
  async function registry(name: string): Promise<Map<string, [string, boolean]>> {
    const r = await pool.query<{ handle: string; state: string; referenced: boolean }>(
      `SELECT handle, state, unreferenced_at IS NULL AS referenced FROM ${t('object')} WHERE name = $1`,
      [name],
    );
    return new Map(r.rows.map((x) => [x.handle, [x.state, x.referenced]]));
  }

  it('the registry rows: the new one published and referenced, the replaced one unreferenced; the same handle again; a replaced row already gone', async () => {
    const name = 'reports/registry';
    const h1 = await staged(name, 5n);
    const h2 = await staged(name, 5n);
    await publish(name, h1, 5n);
    assert.equal((await publish(name, h2, 5n)).status, 'applied');
    assert.deepEqual(
      await registry(name),
      new Map([
        [h1, ['published', false]],
        [h2, ['published', true]],
      ]),
    );
    // The visible handle once more: one row in the statement, still referenced.
    assert.deepEqual(await publish(name, h2, 5n), {
      status: 'applied',
      version: 3,
      previousHandle: h2,
    });
    assert.deepEqual((await registry(name)).get(h2), ['published', true]);
    // A replaced row that is gone (removed by hand) does not stop the publish.
    await pool.query(`DELETE FROM ${t('object')} WHERE handle = $1`, [h2]);
    assert.deepEqual(await publish(name, h1, 5n), {
      status: 'applied',
      version: 4,
      previousHandle: h2,
    });
    assert.deepEqual(await registry(name), new Map([[h1, ['published', true]]]));
  });

  it("a collector's tombstone that commits while the publish waits on the object row: not_staged, nothing moved", async () => {
    const name = 'reports/tombstoned-mid-publish';
    const h1 = await staged(name, 5n);
    await publish(name, h1, 5n);
    const h2 = await staged(name, 5n);
    // A store whose lock timeout outlasts the hold below (this suite's store has 300 ms).
    const patient = new PostgresPointerStore({ connectionString: PG_URL, schema, timeout: '30s' });
    const collector = await pool.connect();
    try {
      await collector.query('BEGIN');
      await collector.query(`UPDATE ${t('object')} SET state = 'tombstoned' WHERE handle = $1`, [
        h2,
      ]);
      // The publish reads h2 as staged (the tombstone is not committed), moves the pointer,
      // then waits for h2's row lock: seen in pg_stat_activity, not guessed.
      const publishing = patient.publish({
        name,
        handle: h2,
        token: 5n,
        leaseKey: KEY,
        leaseId: 'lease',
        expectedVersion: undefined,
        idempotencyKey: undefined,
      });
      const deadline = Date.now() + 20_000;
      for (;;) {
        const w = await pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
          [`${P}_publish_v4`],
        );
        if (w.rows.length > 0) break;
        assert.ok(Date.now() < deadline, 'the publish never waited on the object row');
        await new Promise((r) => setTimeout(r, 10));
      }
      await collector.query('COMMIT');
      const r = await publishing;
      assert.equal(r.status, 'not_staged');
      // The whole publish rolled back: the pointer, the history and h1's row are as before.
      const pointer = await store.pointer(name);
      assert.equal(pointer?.handle, h1);
      assert.equal(pointer?.version, 1);
      assert.equal((await store.history(name, 10)).length, 1);
      assert.deepEqual((await registry(name)).get(h1), ['published', true]);
    } finally {
      collector.release();
      await patient.close();
    }
  });

  it('the registry has no index but its primary key, and room for in-place updates', async () => {
    const r = await pool.query<{ indexname: string }>(
      `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = $2`,
      [schema, `${P}_object`],
    );
    assert.deepEqual(
      r.rows.map((x) => x.indexname),
      [`${P}_object_pkey`],
    );
    const o = await pool.query<{ reloptions: string[] | null }>(
      `SELECT reloptions FROM pg_class WHERE oid = $1::regclass`,
      [t('object')],
    );
    assert.deepEqual(o.rows[0]!.reloptions, ['fillfactor=80']);
  });
});
