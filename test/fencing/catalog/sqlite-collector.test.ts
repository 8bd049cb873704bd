import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { tempDir } from '../../support/tmp.js';
import { testLease } from './suite.js';

// SQLite pointer store version 4 (decision 028): the common publish writes no registry row;
// the collector reads from the history when each replaced object stopped being visible, and
// a collector of an older version is refused.

const P = 'leasehold_catalog';

function open(dir: string): { db: Database.Database; catalog: Catalog } {
  const db = new Database(join(dir, 'catalog.db'));
  db.pragma('journal_mode = WAL');
  const catalog = new Catalog({
    pointers: new SqlitePointerStore({ database: db }),
    objects: new DirectoryObjectStore({ root: join(dir, 'objects') }),
  });
  return { db, catalog };
}

/** handle → [state, unreferenced_ms] of the registry rows of `name`. */
function registry(db: Database.Database, name: string): Map<string, [string, number | null]> {
  const rows = db
    .prepare(`SELECT handle, state, unreferenced_ms FROM ${P}_object WHERE name = ?`)
    .all(name) as { handle: string; state: string; unreferenced_ms: number | null }[];
  return new Map(rows.map((r) => [r.handle, [r.state, r.unreferenced_ms]]));
}

describe('SQLite catalog collector (pointer store version 4)', () => {
  it("a replaced object's retention starts at the publish that replaced it, written by the next collection", async () => {
    const tmp = tempDir('catalog-sqlite-gc');
    const { db, catalog } = open(tmp.dir);
    try {
      const lease = testLease('report/collector', 3n);
      const name = 'reports/collector';
      const h1 = (await catalog.stage(lease, name, 'one')).handle;
      const h2 = (await catalog.stage(lease, name, 'two')).handle;
      const h3 = (await catalog.stage(lease, name, 'three')).handle;
      // Staged an hour ago: a retention counted from the staging would have passed.
      db.prepare(`UPDATE ${P}_object SET unreferenced_ms = ? WHERE name = ?`).run(
        Date.now() - 3_600_000,
        name,
      );
      assert.equal((await catalog.publish(lease, name, h1)).status, 'applied');
      assert.equal((await catalog.publish(lease, name, h2)).status, 'applied');
      const h2Row = registry(db, name).get(h2);
      assert.equal((await catalog.publish(lease, name, h3)).status, 'applied');
      // The common publishes wrote no registry row: h2 is as it was while visible.
      assert.deepEqual(registry(db, name).get(h2), h2Row);
      const [v3, v2] = await catalog.history(name, { limit: 2 });
      // A collection with a retention of a minute takes neither h1 nor h2 (replaced just now)...
      const gc = await catalog.gc({ retention: '1m' });
      assert.deepEqual(gc.deleted, []);
      // ...because it first wrote when each was replaced.
      const rows = registry(db, name);
      assert.deepEqual(rows.get(h1)?.[1], v2!.publishedAtMs);
      assert.deepEqual(rows.get(h2)?.[1], v3!.publishedAtMs);
      // With no retention both go, and the visible one stays.
      const all = await catalog.gc({ retention: 0 });
      assert.deepEqual([...all.deleted].sort(), [h1, h2].sort());
      const read = await catalog.read(name);
      assert.equal(read.status === 'found' && read.body.toString(), 'three');
    } finally {
      await catalog.close();
      db.close();
      tmp.remove();
    }
  });

  it('refuses a tombstone by a collector of version 3 (it reads retention starts publishes no longer write): an error, the row unchanged', async () => {
    const tmp = tempDir('catalog-sqlite-gc');
    const { db, catalog } = open(tmp.dir);
    try {
      const lease = testLease('report/old-collector', 3n);
      const name = 'reports/old-collector';
      const h1 = (await catalog.stage(lease, name, 'one')).handle;
      // Version 3's TOMBSTONE statement, retention 0.
      const old = db.prepare(`
        UPDATE ${P}_object SET state = 'tombstoned'
        WHERE handle IN (
          SELECT o.handle FROM ${P}_object o
          WHERE o.unreferenced_ms IS NOT NULL AND o.unreferenced_ms < ? AND o.state <> 'tombstoned'
            AND NOT EXISTS (SELECT 1 FROM ${P}_pointer p WHERE p.handle = o.handle)
          LIMIT 100)`);
      assert.throws(() => old.run(Date.now() + 1), /upgrade the process that runs gc/);
      assert.deepEqual(registry(db, name).get(h1)?.[0], 'staged');
      // The current collector takes it.
      assert.deepEqual((await catalog.gc({ retention: 0 })).deleted, [h1]);
    } finally {
      await catalog.close();
      db.close();
      tmp.remove();
    }
  });
});
