import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { Catalog } from '../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../src/fencing/catalog/objects/directory.js';
import { SqlitePointerStore } from '../../src/fencing/catalog/pointers/sqlite/store.js';
import { spawnCli } from '../support/cli.js';
import { PG_URL, uniqueSchema, withPgClient } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import { testLease } from '../fencing/catalog/suite.js';

describe('leasehold catalog ls | show | history | gc (real processes)', () => {
  const tmp = tempDir('cli-catalog');
  after(() => tmp.remove());
  const pointers = `sqlite:${join(tmp.dir, 'catalog.db')}`;
  const objects = `dir:${join(tmp.dir, 'objects')}`;

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    const p = spawnCli(['catalog', ...args], { cwd: tmp.dir });
    const code = await p.exited;
    return { code, out: p.stdout(), err: p.stderr() };
  }

  it('lists, shows and prints history as text and JSON; gc deletes only past the retention', async () => {
    const catalog = new Catalog({
      pointers: new SqlitePointerStore({ path: join(tmp.dir, 'catalog.db') }),
      objects: new DirectoryObjectStore({ root: join(tmp.dir, 'objects') }),
    });
    const a = testLease('report/july', 41n);
    const b = testLease('report/july', 42n);
    const sa = await catalog.stage(a, 'reports/july', "A's report");
    const sb = await catalog.stage(b, 'reports/july', "B's report");
    const first = await catalog.stage(b, 'reports/june', 'june');
    assert.equal((await catalog.publish(b, 'reports/july', sb.handle)).status, 'applied');
    assert.equal((await catalog.publish(a, 'reports/july', sa.handle)).status, 'stale_fence');
    assert.equal((await catalog.publish(b, 'reports/june', first.handle)).status, 'applied');
    await catalog.close();

    const ls = await cli('ls', 'reports/', '--pointers', pointers, '--json');
    assert.equal(ls.code, EXIT.ok, ls.err);
    const listed = JSON.parse(ls.out) as {
      entries: { name: string; token: string; handle: string }[];
    };
    assert.deepEqual(
      listed.entries.map((e) => [e.name, e.token, e.handle]),
      [
        ['reports/july', '42', sb.handle],
        ['reports/june', '42', first.handle],
      ],
    );
    const text = await cli('ls', '--pointers', pointers);
    assert.match(text.out, /^NAME\s+VERSION\s+TOKEN/m);
    assert.match(text.out, /reports\/july\s+1\s+42\s+10\s/);

    const show = await cli('show', 'reports/july', '--pointers', pointers, '--json');
    assert.equal(show.code, EXIT.ok, show.err);
    assert.equal((JSON.parse(show.out) as { entry: { handle: string } }).entry.handle, sb.handle);
    const missing = await cli('show', 'reports/august', '--pointers', pointers);
    assert.equal(missing.code, EXIT.error);
    const bad = await cli('show', 'reports/../x', '--pointers', pointers);
    assert.equal(bad.code, EXIT.usage);
    assert.match(bad.err, /name/);

    const hist = await cli('history', 'reports/july', '--pointers', pointers, '--json');
    assert.deepEqual(
      (JSON.parse(hist.out) as { history: { version: number; token: string }[] }).history.map(
        (h) => [h.version, h.token],
      ),
      [[1, '42']],
    );

    const noObjects = await cli('gc', '--retention', '1h', '--pointers', pointers);
    assert.equal(noObjects.code, EXIT.usage);
    const keep = await cli(
      'gc',
      '--retention',
      '1h',
      '--pointers',
      pointers,
      '--objects',
      objects,
      '--json',
    );
    assert.equal(keep.code, EXIT.ok, keep.err);
    assert.deepEqual((JSON.parse(keep.out) as { deleted: string[] }).deleted, []);
    await new Promise((r) => setTimeout(r, 5)); // the clock passes the staging time
    const gc = await cli(
      'gc',
      '--retention',
      '0',
      '--pointers',
      pointers,
      '--objects',
      objects,
      '--json',
    );
    assert.equal(gc.code, EXIT.ok, gc.err);
    assert.deepEqual((JSON.parse(gc.out) as { deleted: string[] }).deleted, [sa.handle]);
  });

  it('gc with mistyped --pointers deletes nothing and creates no catalog (else every object would be an orphan)', async () => {
    const root = join(tmp.dir, 'typo-objects');
    const catalog = new Catalog({
      pointers: new SqlitePointerStore({ path: join(tmp.dir, 'typo-catalog.db') }),
      objects: new DirectoryObjectStore({ root }),
    });
    const a = testLease('report/typo', 7n);
    const visible = await catalog.stage(a, 'reports/typo', 'the visible report');
    assert.equal((await catalog.publish(a, 'reports/typo', visible.handle)).status, 'applied');
    await catalog.close();
    await new Promise((r) => setTimeout(r, 5)); // older than a retention of 0
    const typoSchema = uniqueSchema('gctypo');
    for (const typo of [
      `sqlite:${join(tmp.dir, 'typo-catalogue.db')}`,
      `${PG_URL}?schema=${typoSchema}`,
    ]) {
      const r = await cli('gc', '--retention', '0', '--pointers', typo, '--objects', `dir:${root}`);
      assert.equal(r.code, EXIT.unavailable, r.err);
      assert.match(r.err, /no catalog here/);
      assert.ok(
        existsSync(join(root, ...visible.handle.split('/'))),
        'the visible object is still there',
      );
    }
    assert.equal(existsSync(join(tmp.dir, 'typo-catalogue.db')), false);
    const schemas = await withPgClient(async (c) => {
      const q = await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [typoSchema]);
      return q.rowCount;
    });
    assert.equal(schemas, 0, 'no schema was created');
  });
});
