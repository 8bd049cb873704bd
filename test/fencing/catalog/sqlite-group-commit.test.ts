import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { tempDir } from '../../support/tmp.js';
import { testLease } from './suite.js';

/**
 * Commits in the WAL file: frames whose header carries the database size after the commit
 * (non-zero only on a transaction's last frame). Checkpoints are off on the handle, so the
 * file holds every commit since the last truncating checkpoint.
 */
function commitsInWal(walPath: string): number {
  const wal = readFileSync(walPath);
  const pageSize = wal.readUInt32BE(8);
  let commits = 0;
  for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
    if (wal.readUInt32BE(off + 4) !== 0) commits++;
  }
  return commits;
}

function open(dir: string): { db: Database.Database; catalog: Catalog } {
  const db = new Database(join(dir, 'catalog.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('wal_autocheckpoint = 0');
  const catalog = new Catalog({
    pointers: new SqlitePointerStore({ database: db }),
    objects: new DirectoryObjectStore({ root: join(dir, 'objects') }),
  });
  return { db, catalog };
}

describe('SQLite pointers: publishes that meet share one commit', () => {
  it('commits the publishes asked for in one turn together, each decided as if alone', async () => {
    const tmp = tempDir('catalog-group');
    const { db, catalog } = open(tmp.dir);
    const wal = join(tmp.dir, 'catalog.db-wal');
    try {
      const l41 = testLease('report/g', 41n);
      const l42 = testLease('report/g', 42n);
      const other = testLease('report/other', 42n);
      // reports/n has a collected handle; reports/s is at 42 already; reports/v at version 1.
      const nGone = await catalog.stage(l42, 'reports/n', 'gone');
      const nKept = await catalog.stage(l42, 'reports/n', 'kept');
      assert.equal((await catalog.publish(l42, 'reports/n', nKept.handle)).status, 'applied');
      assert.deepEqual((await catalog.gc({ retention: 0 })).deleted, [nGone.handle]);
      const s42 = await catalog.stage(l42, 'reports/s', 's42');
      const s41 = await catalog.stage(l41, 'reports/s', 's41');
      assert.equal((await catalog.publish(l42, 'reports/s', s42.handle)).status, 'applied');
      const v1 = await catalog.stage(l42, 'reports/v', 'v1');
      const v2 = await catalog.stage(l42, 'reports/v', 'v2');
      assert.equal((await catalog.publish(l42, 'reports/v', v1.handle)).status, 'applied');
      const a41 = await catalog.stage(l41, 'reports/a', 'a41');
      const a42 = await catalog.stage(l42, 'reports/a', 'a42');
      const fresh = await catalog.stage(l42, 'reports/fresh', 'fresh');
      const k = await catalog.stage(other, 'reports/v', 'k');
      db.pragma('wal_checkpoint(TRUNCATE)');

      // All asked for in one turn of the event loop.
      const asked = [
        catalog.publish(l41, 'reports/s', s41.handle), // 41 after 42
        catalog.publish(l42, 'reports/v', v2.handle, { expectedVersion: 5 }),
        catalog.publish(l42, 'reports/n', nGone.handle), // collected
        catalog.publish(other, 'reports/v', k.handle), // another lease key: throws
        catalog.publish(l41, 'reports/a', a41.handle), // 41, then 42 of the same name
        catalog.publish(l42, 'reports/a', a42.handle),
        catalog.publish(l42, 'reports/fresh', fresh.handle, { idempotencyKey: 'op-1' }),
        catalog.publish(l42, 'reports/fresh', fresh.handle, { idempotencyKey: 'op-1' }),
      ];
      const got = await Promise.allSettled(asked);
      const value = (i: number): unknown => {
        const r = got[i]!;
        return r.status === 'fulfilled' ? r.value : r.reason;
      };
      assert.deepEqual(value(0), { status: 'stale_fence', highWaterMark: 42n });
      assert.deepEqual(value(1), { status: 'version_conflict', currentVersion: 1 });
      assert.deepEqual(value(2), { status: 'not_staged' });
      const wrongKey = value(3);
      assert.ok(isLeaseholdError(wrongKey, 'ERR_INVALID_ARGUMENT'), String(wrongKey));
      assert.deepEqual(value(4), { status: 'applied', version: 1, previousHandle: undefined });
      assert.deepEqual(value(5), { status: 'applied', version: 2, previousHandle: a41.handle });
      assert.deepEqual(value(6), { status: 'applied', version: 1, previousHandle: undefined });
      assert.deepEqual(value(7), { status: 'duplicate', version: 1 });
      assert.equal(commitsInWal(wal), 1, 'the whole turn is one commit');

      // The refused publishes left nothing behind; the applied ones everything.
      assert.equal((await catalog.head('reports/s'))?.handle, s42.handle);
      assert.equal((await catalog.history('reports/s')).length, 1);
      assert.equal((await catalog.head('reports/v'))?.handle, v1.handle);
      assert.equal((await catalog.history('reports/v')).length, 1);
      assert.equal((await catalog.head('reports/n'))?.handle, nKept.handle);
      assert.equal((await catalog.head('reports/a'))?.handle, a42.handle);
      assert.deepEqual(
        (await catalog.history('reports/a')).map((e) => e.token),
        [42n, 41n],
      );
      assert.equal((await catalog.head('reports/fresh'))?.version, 1);
      // a41 is unreferenced from this commit: collectable, a42 and the rest are not.
      assert.deepEqual(
        [...(await catalog.gc({ retention: 0 })).deleted].sort(),
        [a41.handle, k.handle, s41.handle, v2.handle].sort(),
      );
    } finally {
      await catalog.close();
      db.close();
      tmp.remove();
    }
  });

  it('commits publishes awaited one after another one by one', async () => {
    const tmp = tempDir('catalog-group-seq');
    const { db, catalog } = open(tmp.dir);
    try {
      const l = testLease('report/q', 7n);
      const staged = [];
      for (let i = 0; i < 3; i++) staged.push(await catalog.stage(l, 'reports/q', `q${i}`));
      db.pragma('wal_checkpoint(TRUNCATE)');
      for (const s of staged) {
        assert.equal((await catalog.publish(l, 'reports/q', s.handle)).status, 'applied');
      }
      assert.equal(commitsInWal(join(tmp.dir, 'catalog.db-wal')), 3);
    } finally {
      await catalog.close();
      db.close();
      tmp.remove();
    }
  });

  it('answers publishes asked for just before close', async () => {
    const tmp = tempDir('catalog-group-close');
    const { db, catalog } = open(tmp.dir);
    try {
      const l = testLease('report/c', 3n);
      const s = await catalog.stage(l, 'reports/c', 'c');
      const p = catalog.publish(l, 'reports/c', s.handle);
      await catalog.close();
      assert.equal((await p).status, 'applied');
      const row = db
        .prepare('SELECT handle FROM leasehold_catalog_pointer WHERE name = ?')
        .get('reports/c') as { handle: string } | undefined;
      assert.equal(row?.handle, s.handle);
    } finally {
      db.close();
      tmp.remove();
    }
  });
});
