import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { PostgresPointerStore } from '../../../src/fencing/catalog/pointers/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { stagedPostgresRow } from './pointers.js';

// The publish statement of pointer store version 5 (decision 025): one scalar call that
// bounds its own lock waits by the store's timeout, and that writes exactly what version 4's
// function writes, so processes of either version can publish to one catalog. Version 6
// (decision 027): registry rows updated in place (no collector index). Version 7 (decision
// 028): the common publish locks the row of the object it makes visible instead of writing
// it, and only a collector of version 7 tombstones.

const KEY = 'report/publish';
const P = 'leasehold_catalog';

describe('PostgreSQL catalog publish (version 5 call, version 7 function)', () => {
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

  it('history is newest first by version as a number: version 10 before 9 (not as text)', async () => {
    const name = 'reports/history-order';
    for (let v = 1; v <= 11; v++) {
      const r = await publish(name, await staged(name, BigInt(v)), BigInt(v));
      assert.equal(r.status, 'applied');
    }
    const history = await store.history(name, 20);
    assert.deepEqual(
      history.map((e) => e.version),
      [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1],
    );
    assert.deepEqual(
      history.map((e) => e.token),
      [11n, 10n, 9n, 8n, 7n, 6n, 5n, 4n, 3n, 2n, 1n],
    );
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
    // After a collection has read the history, every handle but the visible one has its
    // retention running, so the collector may take it later; the visible one is the pointer's.
    await store.tombstone(3_600_000, 100);
    const rows = await registry(name);
    assert.equal(rows.size, 6);
    for (const [handle, [visible, since]] of rows) {
      assert.equal(visible, handle === history[0]!.handle, handle);
      if (!visible) assert.notEqual(since, null, handle);
    }
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

  /** Resolves once a statement calling the catalog function `<prefix>_<fn>` waits on a lock (seen, not guessed). */
  async function waitingOnLock(fn: string, never: string): Promise<void> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const w = await pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
        [`${P}_${fn}`],
      );
      if (w.rows.length > 0) return;
      assert.ok(Date.now() < deadline, never);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * The registry rows of `name`: handle → [visible (the pointer shows it), the time its
   * retention counts from in ms (unreferenced_at), or null].
   */
  async function registry(name: string): Promise<Map<string, [boolean, number | null]>> {
    const r = await pool.query<{ handle: string; visible: boolean; since: string | null }>(
      `SELECT o.handle,
         EXISTS (SELECT 1 FROM ${t('pointer')} p WHERE p.name = o.name AND p.handle = o.handle) AS visible,
         (extract(epoch FROM o.unreferenced_at) * 1000)::bigint::text AS since
       FROM ${t('object')} o WHERE o.name = $1`,
      [name],
    );
    return new Map(
      r.rows.map((x) => [x.handle, [x.visible, x.since === null ? null : Number(x.since)]]),
    );
  }

  it("the registry rows: the replaced one's retention starts at the publish that replaced it (written by the next collection); the same handle again; a replaced row already gone", async () => {
    const name = 'reports/registry';
    const h1 = await staged(name, 5n);
    const h2 = await staged(name, 5n);
    // Staged an hour ago, so a retention time from the staging cannot pass for the publish's.
    await pool.query(
      `UPDATE ${t('object')} SET unreferenced_at = clock_timestamp() - interval '1 hour' WHERE name = $1`,
      [name],
    );
    const stagedSince = (await registry(name)).get(h2)![1];
    await publish(name, h1, 5n);
    assert.equal((await publish(name, h2, 5n)).status, 'applied');
    const replacedAt = (await store.history(name, 1))[0]!.publishedAtMs;
    // The common publish writes no registry row: the replaced one is as the name's first
    // publish (the full path) left it, referenced...
    assert.deepEqual((await registry(name)).get(h1), [false, null]);
    // ...until a collection reads the history (a retention of an hour takes nothing here).
    await store.tombstone(3_600_000, 100);
    assert.deepEqual(
      await registry(name),
      new Map([
        [h1, [false, replacedAt]],
        [h2, [true, stagedSince]],
      ]),
    );
    // The visible handle once more: nothing replaced, nothing written to the registry.
    assert.deepEqual(await publish(name, h2, 5n), {
      status: 'applied',
      version: 3,
      previousHandle: h2,
    });
    assert.deepEqual((await registry(name)).get(h2), [true, stagedSince]);
    // A replaced row that is gone (removed by hand) does not stop the publish.
    await pool.query(`DELETE FROM ${t('object')} WHERE handle = $1`, [h2]);
    assert.deepEqual(await publish(name, h1, 5n), {
      status: 'applied',
      version: 4,
      previousHandle: h2,
    });
    await store.tombstone(3_600_000, 100);
    assert.deepEqual(await registry(name), new Map([[h1, [true, replacedAt]]]));
  });

  it('an object replaced by a publish that commits while a collection is under way is left for the next one, which starts its retention', async () => {
    const name = 'reports/replaced-mid-gc';
    const x = await staged(name, 5n);
    await publish(name, x, 5n);
    await store.tombstone(60_000, 100); // the collector has read this name's history to v1
    const y = await staged(name, 5n);
    await publish(name, y, 5n); // v2, not read by a collector yet
    // y was staged long ago: once unreferenced, only its replacement time keeps it.
    await pool.query(
      `UPDATE ${t('object')} SET unreferenced_at = clock_timestamp() - interval '1 hour' WHERE handle = $1`,
      [y],
    );
    const z = await staged(name, 5n);
    const patient = new PostgresPointerStore({ connectionString: PG_URL, schema, timeout: '30s' });
    const blocker = await pool.connect();
    try {
      // Hold the collector after it has read the history (v2: y visible), before it locks
      // its candidates: its mark's upsert waits on this lock.
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM ${t('gc_mark')} WHERE name = $1 FOR UPDATE`, [name]);
      const collecting = patient.tombstone(60_000, 100);
      await waitingOnLock('tombstone', 'the collection never waited on its mark');
      // Meanwhile z replaces y (v3) and commits: y is unreferenced now, its row still says
      // an hour ago, and the collection's history read did not see v3.
      assert.equal((await publish(name, z, 5n)).status, 'applied');
      await blocker.query('ROLLBACK');
      const first = await collecting;
      assert.ok(!first.some((r) => r.handle === y), JSON.stringify(first));
      // The next collection reads v3: y's retention starts at z's publish.
      const second = await store.tombstone(60_000, 100);
      assert.ok(!second.some((r) => r.handle === y), JSON.stringify(second));
      const rows = await registry(name);
      assert.deepEqual(rows.get(y), [false, (await store.history(name, 1))[0]!.publishedAtMs]);
      assert.equal(rows.get(z)?.[0], true);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
      await patient.close();
    }
  });

  it("a collector's tombstone that commits while the publish waits on the object row: not_staged, nothing moved", async () => {
    const name = 'reports/tombstoned-mid-publish';
    const h1 = await staged(name, 5n);
    await publish(name, h1, 5n);
    const h2 = await staged(name, 5n);
    const h1Before = (await registry(name)).get(h1);
    assert.equal(h1Before?.[0], true);
    // A store whose lock timeout outlasts the hold below (this suite's store has 300 ms).
    const patient = new PostgresPointerStore({ connectionString: PG_URL, schema, timeout: '30s' });
    const collector = await pool.connect();
    try {
      // As the collector does it (migration 0007's function): the row locked FOR UPDATE, then
      // tombstoned, under the collector's setting.
      await collector.query('BEGIN');
      await collector.query(`SELECT set_config('leasehold.catalog_collector', '7', true)`);
      await collector.query(`SELECT 1 FROM ${t('object')} WHERE handle = $1 FOR UPDATE`, [h2]);
      await collector.query(`UPDATE ${t('object')} SET state = 'tombstoned' WHERE handle = $1`, [
        h2,
      ]);
      // The publish waits for h2's row lock (its KEY SHARE lock conflicts with the
      // collector's FOR UPDATE): seen in pg_stat_activity, not guessed.
      const publishing = patient.publish({
        name,
        handle: h2,
        token: 5n,
        leaseKey: KEY,
        leaseId: 'lease',
        expectedVersion: undefined,
        idempotencyKey: undefined,
      });
      await waitingOnLock('publish_v4', 'the publish never waited on the object row');
      await collector.query('COMMIT');
      const r = await publishing;
      assert.equal(r.status, 'not_staged');
      // The whole publish rolled back: the pointer, the history and h1's row are as before.
      const pointer = await store.pointer(name);
      assert.equal(pointer?.handle, h1);
      assert.equal(pointer?.version, 1);
      assert.equal((await store.history(name, 10)).length, 1);
      assert.deepEqual((await registry(name)).get(h1), h1Before);
    } finally {
      collector.release();
      await patient.close();
    }
  });

  it("refuses a tombstone without the collector's setting (the statement of a version-6 collector): an error, the row unchanged", async () => {
    const name = 'reports/old-collector';
    const h1 = await staged(name, 5n);
    // Version 6's collector statement, as those processes send it: it decides on a snapshot
    // taken before its lock, which is safe only with publishes that write the row they make
    // visible. Retention 0, so h1 (staged, never published) is its candidate.
    const oldTombstone = `
      WITH marked AS (
        UPDATE ${t('object')} o SET state = 'tombstoned'
        WHERE o.handle IN (
            SELECT c.handle FROM ${t('object')} c
            WHERE c.unreferenced_at < clock_timestamp() - 0 * interval '1 millisecond'
              AND c.state <> 'tombstoned'
            LIMIT 100 FOR UPDATE SKIP LOCKED)
          AND o.unreferenced_at < clock_timestamp() - 0 * interval '1 millisecond'
          AND o.state <> 'tombstoned'
          AND NOT EXISTS (SELECT 1 FROM ${t('pointer')} p WHERE p.handle = o.handle)
        RETURNING o.handle
      )
      SELECT handle FROM marked`;
    const old = await pool.connect();
    try {
      await assert.rejects(old.query(oldTombstone), (err: unknown) => {
        assert.equal((err as { code?: unknown }).code, 'LHC02');
        assert.match(String(err), /upgrade the process that runs gc/);
        return true;
      });
      // The server sends the error before it ends the statement's transaction (and releases
      // the row locks its FOR UPDATE took): the next answer on the same connection comes after.
      await old.query('SELECT 1');
    } finally {
      old.release();
    }
    const r = await pool.query<{ state: string }>(
      `SELECT state FROM ${t('object')} WHERE handle = $1`,
      [h1],
    );
    assert.equal(r.rows[0]?.state, 'staged');
    // The current collector tombstones it (and this suite's other unreferenced rows).
    const collected = await store.tombstone(0, 100);
    assert.ok(
      collected.some((x) => x.handle === h1),
      JSON.stringify({ h1, collected }),
    );
    const after = await pool.query<{ state: string }>(
      `SELECT state FROM ${t('object')} WHERE handle = $1`,
      [h1],
    );
    assert.equal(after.rows[0]?.state, 'tombstoned');
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
