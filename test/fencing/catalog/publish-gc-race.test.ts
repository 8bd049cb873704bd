import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import type { ObjectStore } from '../../../src/fencing/catalog/object-store.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';
import { holdPublishes, openPointers, type PublishHold, type PointerConfig } from './pointers.js';
import { testLease } from './suite.js';

// The two orders of a publish racing a collection of the same object, put at exact points on
// PostgreSQL (where they really run concurrently; SQLite serialises them on its write lock).

const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 5));

describe('publish racing gc on one object (PostgreSQL pointers)', () => {
  it('a collection while the publish transaction is open (before COMMIT) does not tombstone it; the publish wins', async () => {
    const tmp = tempDir('catalog-race');
    const config = {
      kind: 'postgres',
      url: PG_URL,
      schema: uniqueSchema('catrace'),
    } as const;
    const objects = new DirectoryObjectStore({ root: join(tmp.dir, 'objects') });
    const collector = new Catalog({ pointers: openPointers(config), objects });
    const writer = new Catalog({ pointers: openPointers(config), objects });
    let hold: PublishHold | undefined;
    try {
      const lease = testLease('report/race', 3n);
      const s = await writer.stage(lease, 'reports/race', 'bytes');
      await tick();
      // The publish waits on the server with its object row locked and the pointer moved,
      // uncommitted: the object is older than the retention (0) and unreferenced as far as
      // any other transaction sees.
      hold = await holdPublishes(config);
      const publishing = writer.publish(lease, 'reports/race', s.handle);
      await hold.blocked();
      const during = await collector.gc({ retention: 0 });
      await hold.release();
      hold = undefined;
      assert.equal((await publishing).status, 'applied');
      assert.ok(!during.deleted.includes(s.handle), JSON.stringify(during));
      // Committed: referenced now, so no later collection deletes it either.
      await tick();
      assert.ok(!(await collector.gc({ retention: 0 })).deleted.includes(s.handle));
      const got = await collector.read('reports/race');
      assert.equal(got.status === 'found' && got.body.toString(), 'bytes');
    } finally {
      await hold?.release();
      await writer.close();
      await collector.close();
      await dropSchema(config.schema);
      tmp.remove();
    }
  });

  it('a publish after the collector tombstoned the object (before its bytes are deleted) is not_staged', async () => {
    const tmp = tempDir('catalog-race');
    const config: PointerConfig = {
      kind: 'postgres',
      url: PG_URL,
      schema: uniqueSchema('catrace'),
    };
    const inner = new DirectoryObjectStore({ root: join(tmp.dir, 'objects') });
    const writer = new Catalog({ pointers: openPointers(config), objects: inner });
    const lease = testLease('report/race', 3n);
    let publishedBetween: string | undefined;
    let target = '';
    // The collector's object store, with one interleaving point: between the tombstone
    // transaction and the byte deletion, the writer publishes the same object.
    const objects: ObjectStore = {
      description: inner.description,
      put: (k, b) => inner.put(k, b),
      get: (k) => inner.get(k),
      list: () => inner.list(),
      close: () => inner.close(),
      delete: async (k) => {
        if (k === target && publishedBetween === undefined) {
          publishedBetween = (await writer.publish(lease, 'reports/race', k)).status;
        }
        return inner.delete(k);
      },
    };
    const collector = new Catalog({ pointers: openPointers(config), objects });
    try {
      const s = await writer.stage(lease, 'reports/race', 'bytes');
      target = s.handle;
      await tick();
      const r = await collector.gc({ retention: 0 });
      assert.equal(publishedBetween, 'not_staged');
      assert.deepEqual(r.deleted, [s.handle]);
      assert.deepEqual(await writer.read('reports/race'), { status: 'not_found' });
    } finally {
      await writer.close();
      await collector.close();
      await dropSchema(config.schema);
      tmp.remove();
    }
  });
});
