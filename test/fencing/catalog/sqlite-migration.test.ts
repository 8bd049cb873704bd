import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { tempDir } from '../../support/tmp.js';

// A catalog made by an older leasehold (SQLite pointer store version 1: the mark in the
// fence table, moved by SqliteFence.apply around the pointer move) is migrated to version 2
// on first use by the current store: the marks move into the pointer rows, history stays,
// and an old writer's publish fails closed instead of checking a mark that no longer moves.

const KEY = 'report/migrate';
const P = 'leasehold_catalog';
const V1 = new URL(
  '../../../src/fencing/catalog/pointers/sqlite/migrations/0001_catalog.sql',
  import.meta.url,
);

describe('SQLite catalog: migration of a version-1 catalog to version 2', () => {
  const tmp = tempDir('catalog-sqlite-mig');
  const path = join(tmp.dir, 'catalog.db');
  let old: Database.Database;
  let oldFence: SqliteFence;
  let store: SqlitePointerStore;

  /** A complete staged registry row, as stage() leaves it. */
  function staged(db: Database.Database, name: string, token: bigint): string {
    const handle = `${name}@${token}-${randomUUID().replaceAll('-', '').slice(0, 24)}`;
    db.prepare(
      `INSERT INTO ${P}_object (handle, name, state, token, lease_id, size, checksum, staged_ms, unreferenced_ms)
       VALUES (?, ?, 'staged', ?, 'lease', 3, 'sum', 1, 1)`,
    ).run(handle, name, token);
    return handle;
  }

  /** A publish the way pointer store version 1 made it: the fence's apply around the move. */
  function oldPublish(name: string, handle: string, token: bigint): string {
    const r = oldFence.apply(name, token, (db) => {
      const cur = db.prepare(`SELECT version FROM ${P}_pointer WHERE name = ?`).get(name) as
        { version: number } | undefined;
      const version = (cur?.version ?? 0) + 1;
      db.prepare(
        `INSERT INTO ${P}_pointer (name, handle, token, lease_key, lease_id, version, size, checksum, published_ms)
         VALUES (@name, @handle, @token, @key, 'lease', @version, 3, 'sum', 2)
         ON CONFLICT (name) DO UPDATE SET handle = excluded.handle, token = excluded.token,
           version = excluded.version, published_ms = excluded.published_ms`,
      ).run({ name, handle, token, key: KEY, version });
      db.prepare(
        `INSERT INTO ${P}_history (name, version, handle, token, lease_key, lease_id, size, checksum, published_ms)
         VALUES (?, ?, ?, ?, ?, 'lease', 3, 'sum', 2)`,
      ).run(name, version, handle, token, KEY);
      db.prepare(
        `UPDATE ${P}_object SET state = 'published', unreferenced_ms = NULL WHERE handle = ?`,
      ).run(handle);
    });
    return r.status;
  }

  function publishNew(
    name: string,
    token: bigint,
    expectedVersion?: number,
  ): ReturnType<SqlitePointerStore['publish']> {
    const db = new Database(path);
    const handle = staged(db, name, token);
    db.close();
    return store.publish({
      name,
      handle,
      token,
      leaseKey: KEY,
      leaseId: 'lease',
      expectedVersion,
      idempotencyKey: undefined,
    });
  }

  before(() => {
    old = new Database(path);
    old.pragma('journal_mode = WAL');
    oldFence = new SqliteFence({ database: old, table: `${P}_fence` });
    const fill = (sql: string): string =>
      sql.replace(
        /\{\{(\w+)\}\}/g,
        (_, k: string) => `"${P}_${k === 'object_gc_index' ? 'object_gc' : k}"`,
      );
    old.exec(fill(readFileSync(V1, 'utf8')));
    old.exec(
      `CREATE TABLE ${P}_migrations (name TEXT PRIMARY KEY NOT NULL, applied_ms INTEGER NOT NULL) STRICT`,
    );
    old.prepare(`INSERT INTO ${P}_migrations VALUES ('0001_catalog.sql', 1)`).run();
    // Two names published by the old code; a third fenced (mark 9) but never shown.
    for (const token of [5n, 7n]) {
      assert.equal(oldPublish('reports/a', staged(old, 'reports/a', token), token), 'applied');
    }
    assert.equal(oldPublish('reports/b', staged(old, 'reports/b', 4n), 4n), 'applied');
    assert.equal(oldFence.apply('reports/c', 9n, () => undefined).status, 'applied');
    store = new SqlitePointerStore({ path });
  });

  after(async () => {
    await store?.close();
    old?.close();
    tmp.remove();
  });

  it('carries the marks over: a lower token is stale, the mark token publishes', async () => {
    const before = await store.pointer('reports/a');
    assert.equal(before?.token, 7n);
    assert.equal(before?.version, 2);
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
    const handle = staged(old, 'reports/b', 50n);
    assert.throws(() => oldPublish('reports/b', handle, 50n), /upgrade leasehold to publish/);
    const p = await store.pointer('reports/b');
    assert.equal(p?.token, 4n);
    assert.equal(p?.version, 1);
    // The new store still publishes it, with the mark of the old code.
    assert.deepEqual(await publishNew('reports/b', 3n), {
      status: 'stale_fence',
      highWaterMark: 4n,
    });
    assert.equal((await publishNew('reports/b', 50n, 1)).status, 'applied');
  });
});
