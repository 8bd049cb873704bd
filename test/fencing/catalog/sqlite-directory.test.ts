import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { Logger } from '../../../src/core/events.js';
import type { ObjectStore } from '../../../src/fencing/catalog/object-store.js';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { tempDir } from '../../support/tmp.js';
import { catalogSuite, testLease } from './suite.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

catalogSuite('SQLite pointers × directory objects', () => {
  const tmp = tempDir('catalog-sqlite');
  const path = join(tmp.dir, 'catalog.db');
  const root = join(tmp.dir, 'objects');
  const objects = new DirectoryObjectStore({ root });
  const catalog = new Catalog({ pointers: new SqlitePointerStore({ path }), objects });
  return Promise.resolve({
    catalog,
    objects,
    putRaw: (key: string, body: string) => {
      const p = join(root, ...key.split('/'));
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, body);
      return Promise.resolve();
    },
    strict: () =>
      Promise.resolve(
        new Catalog({
          pointers: new SqlitePointerStore({ path, tablePrefix: 'strict_catalog', policy: '>' }),
          objects,
        }),
      ),
    close: async () => {
      await catalog.close();
      tmp.remove();
    },
  });
});

describe('catalog read racing a publish and a collection', () => {
  it('a read whose object was replaced and collected mid-read returns the newer object', async () => {
    const tmp = tempDir('catalog-read-race');
    const path = join(tmp.dir, 'catalog.db');
    const inner = new DirectoryObjectStore({ root: join(tmp.dir, 'objects') });
    const other = new Catalog({ pointers: new SqlitePointerStore({ path }), objects: inner });
    const lease = testLease('report/race', 1n);
    const first = await other.stage(lease, 'reports/race', 'first');
    const second = await other.stage(lease, 'reports/race', 'second');
    assert.equal((await other.publish(lease, 'reports/race', first.handle)).status, 'applied');
    let raced = false;
    // The real directory store, with one interleaving point: the first get of the first
    // object lets another writer publish and a collector run before it reads the file.
    const objects: ObjectStore = {
      description: inner.description,
      put: (k, b) => inner.put(k, b),
      delete: (k) => inner.delete(k),
      list: () => inner.list(),
      close: () => inner.close(),
      get: async (k) => {
        if (k === first.handle && !raced) {
          raced = true;
          assert.equal(
            (await other.publish(lease, 'reports/race', second.handle)).status,
            'applied',
          );
          await new Promise((r) => setTimeout(r, 5));
          assert.deepEqual((await other.gc({ retention: 0 })).deleted, [first.handle]);
        }
        return inner.get(k);
      },
    };
    const reader = new Catalog({ pointers: new SqlitePointerStore({ path }), objects });
    try {
      const got = await reader.read('reports/race');
      assert.ok(raced);
      assert.equal(got.status === 'found' && got.body.toString(), 'second');
    } finally {
      await reader.close();
      await other.close();
      tmp.remove();
    }
  });
});

describe('catalog metrics and logs', () => {
  it('counts into the given registry (shared by two catalogs) and logs stale publishes as warnings', async () => {
    const tmp = tempDir('catalog-metrics');
    const registry = new Registry();
    const lines: { level: string; fields: Record<string, unknown>; message: string }[] = [];
    const logger = Object.fromEntries(
      (['debug', 'info', 'warn', 'error'] as const).map((level) => [
        level,
        (fields: Record<string, unknown>, message: string) =>
          lines.push({ level, fields, message }),
      ]),
    ) as unknown as Logger;
    const open = (): Catalog =>
      new Catalog({
        pointers: new SqlitePointerStore({ path: join(tmp.dir, 'catalog.db') }),
        objects: new DirectoryObjectStore({ root: join(tmp.dir, 'objects') }),
        registry,
        logger,
      });
    const one = open();
    const two = open();
    try {
      const b = testLease('report/m', 42n);
      const a = testLease('report/m', 41n);
      const sb = await one.stage(b, 'reports/m', 'bb');
      const sa = await two.stage(a, 'reports/m', 'a');
      assert.equal((await one.publish(b, 'reports/m', sb.handle)).status, 'applied');
      assert.equal((await two.publish(a, 'reports/m', sa.handle)).status, 'stale_fence');
      const text = await registry.metrics();
      assert.match(text, /leasehold_catalog_publishes_total\{result="applied"\} 1\n/);
      assert.match(text, /leasehold_catalog_publishes_total\{result="stale_fence"\} 1\n/);
      assert.match(text, /leasehold_catalog_staged_bytes_total 3\n/);
      const warn = lines.find((l) => l.level === 'warn');
      assert.equal(warn?.fields['result'], 'stale_fence');
      assert.equal(warn?.fields['highWaterMark'], '42');
      assert.ok(!JSON.stringify(lines).includes(a.leaseId), 'full lease ids are never logged');
    } finally {
      await one.close();
      await two.close();
      tmp.remove();
    }
  });
});
