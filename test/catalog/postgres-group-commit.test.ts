import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../src/core/errors.js';
import { Catalog } from '../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../src/fencing/catalog/objects/directory.js';
import { PostgresPointerStore } from '../../src/fencing/catalog/pointers/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import { testLease } from './suite.js';

describe('PostgreSQL pointers: publishes that meet share one call and one commit', () => {
  it('sends the publishes asked for while one is in flight together, each decided as if alone', async () => {
    const tmp = tempDir('catalog-pg-group');
    const schema = uniqueSchema('catgroup');
    // A real pool, and a count of the publish calls that reach it.
    const real = new pg.Pool({ connectionString: PG_URL, max: 4 });
    const calls: string[] = [];
    const pool = {
      query: (text: string): Promise<unknown> => {
        if (text.includes('_publish_many"(')) calls.push('many');
        else if (text.includes('_publish_v3"(')) calls.push('one');
        return real.query(text);
      },
      connect: () => real.connect(),
      end: () => real.end(),
    };
    const catalog = new Catalog({
      pointers: new PostgresPointerStore({ pool, schema }),
      objects: new DirectoryObjectStore({ root: join(tmp.dir, 'objects') }),
    });
    try {
      const l41 = testLease('report/g', 41n);
      const l42 = testLease('report/g', 42n);
      const other = testLease('report/other', 42n);
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
      const first = await catalog.stage(l42, 'reports/first', 'first');
      const a41 = await catalog.stage(l41, 'reports/a', 'a41');
      const a42 = await catalog.stage(l42, 'reports/a', 'a42');
      const z = await catalog.stage(l42, 'reports/z', 'z');
      const k = await catalog.stage(other, 'reports/v', 'k');
      calls.length = 0;

      // One turn: the first goes at once; the rest wait for it and go as one call, in name
      // order (reports/z before reports/a in the asking order).
      const asked = [
        catalog.publish(l42, 'reports/first', first.handle),
        catalog.publish(l42, 'reports/z', z.handle),
        catalog.publish(l41, 'reports/s', s41.handle), // 41 after 42
        catalog.publish(l42, 'reports/v', v2.handle, { expectedVersion: 5 }),
        catalog.publish(l42, 'reports/n', nGone.handle), // collected
        catalog.publish(other, 'reports/v', k.handle), // another lease key: throws
        catalog.publish(l41, 'reports/a', a41.handle), // 41, then 42 of the same name
        catalog.publish(l42, 'reports/a', a42.handle),
      ];
      const got = await Promise.allSettled(asked);
      const value = (i: number): unknown => {
        const r = got[i]!;
        return r.status === 'fulfilled' ? r.value : r.reason;
      };
      assert.deepEqual(value(0), { status: 'applied', version: 1, previousHandle: undefined });
      assert.deepEqual(value(1), { status: 'applied', version: 1, previousHandle: undefined });
      assert.deepEqual(value(2), { status: 'stale_fence', highWaterMark: 42n });
      assert.deepEqual(value(3), { status: 'version_conflict', currentVersion: 1 });
      assert.deepEqual(value(4), { status: 'not_staged' });
      assert.ok(isLeaseholdError(value(5), 'ERR_INVALID_ARGUMENT'), String(value(5)));
      assert.deepEqual(value(6), { status: 'applied', version: 1, previousHandle: undefined });
      assert.deepEqual(value(7), { status: 'applied', version: 2, previousHandle: a41.handle });

      // The first went alone; the seven that waited for it went as one call (one commit).
      assert.deepEqual(calls, ['one', 'many']);

      // The refused publishes left nothing behind.
      assert.equal((await catalog.head('reports/s'))?.handle, s42.handle);
      assert.equal((await catalog.history('reports/s')).length, 1);
      assert.equal((await catalog.head('reports/v'))?.handle, v1.handle);
      assert.equal((await catalog.history('reports/v')).length, 1);
      assert.equal((await catalog.head('reports/n'))?.handle, nKept.handle);
      assert.equal((await catalog.head('reports/a'))?.handle, a42.handle);
      assert.deepEqual(
        [...(await catalog.gc({ retention: 0 })).deleted].sort(),
        [a41.handle, k.handle, s41.handle, v2.handle].sort(),
      );
    } finally {
      await catalog.close();
      await real.end();
      await dropSchema(schema);
      tmp.remove();
    }
  });

  it('answers publishes asked for just before close', async () => {
    const tmp = tempDir('catalog-pg-group-close');
    const schema = uniqueSchema('catgroup');
    const catalog = new Catalog({
      pointers: new PostgresPointerStore({ connectionString: PG_URL, schema, maxConnections: 2 }),
      objects: new DirectoryObjectStore({ root: join(tmp.dir, 'objects') }),
    });
    try {
      const l = testLease('report/c', 3n);
      const a = await catalog.stage(l, 'reports/c', 'a');
      const b = await catalog.stage(l, 'reports/d', 'b');
      const pa = catalog.publish(l, 'reports/c', a.handle);
      const pb = catalog.publish(l, 'reports/d', b.handle);
      await new Promise<void>((resolve) => setImmediate(resolve));
      await catalog.close();
      assert.equal((await pa).status, 'applied');
      assert.equal((await pb).status, 'applied');
    } finally {
      await catalog.close();
      await dropSchema(schema);
      tmp.remove();
    }
  });
});
