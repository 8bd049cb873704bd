import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { EXIT } from '../../src/cli/exit-codes.js';
import { postgresCatalogMigrations } from '../../src/fencing/catalog/pointers/postgres/migrate.js';
import { PostgresFence } from '../../src/fencing/postgres.js';
import { runMigrations } from '../../src/stores/postgres/migrate.js';
import { stagedPostgresRow } from '../fencing/catalog/pointers.js';
import { DRIVER_PACKAGES } from '../../src/stores/open-store.js';
import { CLI, spawnCli } from '../support/cli.js';
import { freePort } from '../support/ports.js';
import { PG_URL, dropSchema, uniqueSchema, withPgClient } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';

async function cli(
  args: string[],
  cwd?: string,
): Promise<{ code: number; out: string; err: string }> {
  const p = spawnCli(args, cwd === undefined ? {} : { cwd });
  const code = await p.exited;
  return { code, out: p.stdout(), err: p.stderr() };
}

/** The migrations recorded in a schema, in name order. */
async function applied(pool: pg.Pool, schema: string): Promise<string[]> {
  const r = await pool.query<{ name: string }>(
    `SELECT name FROM "${schema}".leasehold_migrations ORDER BY name`,
  );
  return r.rows.map((row) => row.name);
}

describe('read-only CLI commands create nothing; store errors say what to do', () => {
  const tmp = tempDir('cli-ro');
  const schemas: string[] = [];
  after(async () => {
    tmp.remove();
    for (const s of schemas) await dropSchema(s);
  });

  it('ls and status on a PostgreSQL schema without a lease table create no schema, table or function', async () => {
    const typo = uniqueSchema('typo');
    schemas.push(typo);
    const url = `${PG_URL}?schema=${typo}`;
    for (const args of [['ls'], ['status', 'some/key']]) {
      const r = await cli([...args, '--store', url]);
      assert.equal(r.code, EXIT.unavailable, r.err);
      assert.match(r.err, /no lease table here .*run `leasehold migrate --store/);
      assert.doesNotMatch(r.err, /migrate:/);
    }
    const found = await withPgClient(async (c) => {
      const r = await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [typo]);
      return r.rowCount;
    });
    assert.equal(found, 0, 'the schema was not created');
  });

  it('status and ls on a missing SQLite file create no file; migrate creates it, then they work', async () => {
    const path = join(tmp.dir, 'leases.db');
    for (const args of [['status', 'some/key'], ['ls']]) {
      const r = await cli([...args, '--store', `sqlite:${path}`]);
      assert.equal(r.code, EXIT.unavailable, r.err);
      assert.match(r.err, /no lease table here \(.*does not exist\); run `leasehold migrate/);
      assert.equal(existsSync(path), false, 'no file was created');
    }
    // The default store (./leasehold.db) is no different.
    const bare = await cli(['status', 'k'], tmp.dir);
    assert.equal(bare.code, EXIT.unavailable, bare.err);
    assert.equal(existsSync(join(tmp.dir, 'leasehold.db')), false);

    const created = await cli(['migrate', '--store', `sqlite:${path}`]);
    assert.equal(created.code, EXIT.ok, created.err);
    assert.match(created.out, /created the lease table/);
    const again = await cli(['migrate', '--store', `sqlite:${path}`]);
    assert.match(again.out, /up to date/);
    const status = await cli(['status', 'some/key', '--store', `sqlite:${path}`]);
    assert.equal(status.code, EXIT.ok, status.err);
    assert.match(status.out, /some\/key: free/);
  });

  it('status on a SQLite file of something else adds no lease table to it', async () => {
    const path = join(tmp.dir, 'other.db');
    const db = new Database(path);
    db.exec('CREATE TABLE notes (t TEXT)');
    db.close();
    const r = await cli(['status', 'k', '--store', `sqlite:${path}`]);
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.match(r.err, /has none/);
    const check = new Database(path, { readonly: true });
    const tables = check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
    check.close();
    assert.deepEqual(tables, [{ name: 'notes' }]);
  });

  it('catalog ls, show and history on a mistyped PostgreSQL schema create nothing and say there is no catalog there', async () => {
    const typo = uniqueSchema('cattypo');
    schemas.push(typo);
    const pointers = `${PG_URL}?schema=${typo}`;
    for (const args of [['ls'], ['show', 'reports/july'], ['history', 'reports/july']]) {
      const r = await cli(['catalog', ...args, '--pointers', pointers]);
      assert.equal(r.code, EXIT.unavailable, `${args[0]}: ${r.err}`);
      assert.match(r.err, new RegExp(`no catalog here: schema "${typo}" does not exist`));
      assert.match(r.err, /nothing was created/);
    }
    const found = await withPgClient(async (c) => {
      const r = await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [typo]);
      return r.rowCount;
    });
    assert.equal(found, 0, 'the schema was not created');
  });

  it('catalog ls in a PostgreSQL schema without a catalog (another table prefix) adds no table to it', async () => {
    const schema = uniqueSchema('catother');
    schemas.push(schema);
    await withPgClient((c) => c.query(`CREATE SCHEMA "${schema}"`));
    const r = await cli(['catalog', 'ls', '--pointers', `${PG_URL}?schema=${schema}&prefix=typo`]);
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.match(
      r.err,
      new RegExp(`no catalog here: schema "${schema}" has no table typo_pointer`),
    );
    const objects = await withPgClient(async (c) => {
      const q = await c.query(
        `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1`,
        [schema],
      );
      return (q.rows[0] as { n: number }).n;
    });
    assert.equal(objects, 0);
  });

  it('catalog ls of a PostgreSQL catalog made by an older leasehold lists it and migrates nothing', async () => {
    const schema = uniqueSchema('catold');
    schemas.push(schema);
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
    const prefix = 'leasehold_catalog';
    try {
      await pool.query(`CREATE SCHEMA "${schema}"`);
      const fence = new PostgresFence({ pool, schema, table: `${prefix}_fence` });
      await fence.migrate();
      await runMigrations(pool, schema, postgresCatalogMigrations(schema, prefix, 7));
      const handle = await stagedPostgresRow(
        pool,
        `"${schema}".${prefix}_object`,
        'reports/old',
        3n,
      );
      await pool.query(
        `SELECT "${schema}".${prefix}_publish_v4('reports/old', $1, 3, 'report/old', 'lease', NULL, NULL, false, 5000)`,
        [handle],
      );
      const before = await applied(pool, schema);
      const r = await cli(['catalog', 'ls', '--json', '--pointers', `${PG_URL}?schema=${schema}`]);
      assert.equal(r.code, EXIT.ok, r.err);
      assert.deepEqual(
        (JSON.parse(r.out) as { entries: { name: string; handle: string }[] }).entries.map((e) => [
          e.name,
          e.handle,
        ]),
        [['reports/old', handle]],
      );
      assert.deepEqual(await applied(pool, schema), before, 'no migration was applied');
    } finally {
      await pool.end();
    }
  });

  it('catalog ls, show and history on a missing SQLite file create no file', async () => {
    const path = join(tmp.dir, 'catalogue.db');
    for (const args of [['ls'], ['show', 'reports/july'], ['history', 'reports/july']]) {
      const r = await cli(['catalog', ...args, '--pointers', `sqlite:${path}`]);
      assert.equal(r.code, EXIT.unavailable, `${args[0]}: ${r.err}`);
      assert.match(r.err, /no catalog here: .*catalogue\.db does not exist/);
      assert.equal(existsSync(path), false, 'no file was created');
    }
    // The default (./leasehold-catalog.db) is no different.
    const dir = join(tmp.dir, 'empty');
    mkdirSync(dir);
    const bare = await cli(['catalog', 'ls'], dir);
    assert.equal(bare.code, EXIT.unavailable, bare.err);
    assert.deepEqual(readdirSync(dir), []);
  });

  it('catalog ls and show of a SQLite catalog made by an older leasehold read it and migrate nothing', async () => {
    const path = join(tmp.dir, 'catalog-v1.db');
    const prefix = 'leasehold_catalog';
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    const v1 = readFileSync(
      new URL(
        '../../src/fencing/catalog/pointers/sqlite/migrations/0001_catalog.sql',
        import.meta.url,
      ),
      'utf8',
    );
    db.exec(
      v1.replace(
        /\{\{(\w+)\}\}/g,
        (_, k: string) => `"${prefix}_${k === 'object_gc_index' ? 'object_gc' : k}"`,
      ),
    );
    db.exec(
      `CREATE TABLE ${prefix}_migrations (name TEXT PRIMARY KEY NOT NULL, applied_ms INTEGER NOT NULL) STRICT;
       INSERT INTO ${prefix}_migrations VALUES ('0001_catalog.sql', 1);
       INSERT INTO ${prefix}_pointer (name, handle, token, lease_key, lease_id, version, size, checksum, published_ms)
         VALUES ('reports/old', 'reports/old@3-${'a'.repeat(24)}', 3, 'report/old', 'lease', 1, 3, 'sum', 2);`,
    );
    const tables = (): unknown[] =>
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all();
    const before = tables();
    const ls = await cli(['catalog', 'ls', '--json', '--pointers', `sqlite:${path}`]);
    assert.equal(ls.code, EXIT.ok, ls.err);
    assert.deepEqual(
      (JSON.parse(ls.out) as { entries: { name: string }[] }).entries.map((e) => e.name),
      ['reports/old'],
    );
    const show = await cli(['catalog', 'show', 'reports/old', '--pointers', `sqlite:${path}`]);
    assert.equal(show.code, EXIT.ok, show.err);
    assert.deepEqual(tables(), before, 'no table was added');
    assert.deepEqual(db.prepare(`SELECT name FROM ${prefix}_migrations`).all(), [
      { name: '0001_catalog.sql' },
    ]);
    db.close();
  });

  it('catalog ls on a SQLite file of something else adds no table to it', async () => {
    const path = join(tmp.dir, 'notes.db');
    const db = new Database(path);
    db.exec('CREATE TABLE notes (t TEXT)');
    db.close();
    const r = await cli(['catalog', 'ls', '--pointers', `sqlite:${path}`]);
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.match(r.err, /no catalog here: .*notes\.db has no table leasehold_catalog_pointer/);
    const check = new Database(path, { readonly: true });
    const tables = check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
    check.close();
    assert.deepEqual(tables, [{ name: 'notes' }]);
  });

  it('an unreachable PostgreSQL store is named as such, not as a migration', async () => {
    const port = await freePort();
    const r = await cli([
      'acquire',
      'k',
      '--ttl',
      '5s',
      '--store',
      `postgres://postgres@127.0.0.1:${port}/x`,
    ]);
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.match(r.err, /PostgreSQL lease store: .*ECONNREFUSED/);
    assert.doesNotMatch(r.err, /migrate:/);
  });

  it('an unreachable Redis store gives the connection error, not only a timeout', async () => {
    const port = await freePort();
    for (const args of [
      ['status', 'k'],
      ['acquire', 'k', '--ttl', '5s'],
    ]) {
      const r = await cli([...args, '--store', `redis://127.0.0.1:${port}`]);
      assert.equal(r.code, EXIT.unavailable, r.err);
      assert.match(r.err, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`));
    }
  });

  it('the driver versions it asks for are the package peer dependencies', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
      peerDependencies: Record<string, string>;
    };
    for (const [name, range] of Object.entries(DRIVER_PACKAGES)) {
      assert.equal(range, pkg.peerDependencies[name], name);
    }
  });

  it('a missing driver package is named with the version to install', () => {
    // A project of its own: the built CLI and every installed package except ioredis. Node
    // resolves packages from the importing file's directory upward, so ioredis is truly absent.
    const project = join(tmp.dir, 'project');
    const src = dirname(dirname(CLI));
    cpSync(src, join(project, 'src'), { recursive: true });
    const modules = join(project, 'node_modules');
    mkdirSync(modules);
    const installed = join(dirname(dirname(src)), 'node_modules');
    for (const name of readdirSync(installed)) {
      if (name === 'ioredis' || name === '.bin') continue;
      symlinkSync(join(installed, name), join(modules, name));
    }
    const r = spawnSync(
      process.execPath,
      [join(project, 'src', 'cli', 'main.js'), 'ls', '--store', 'redis://127.0.0.1:1'],
      { cwd: project, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_PATH: '' } },
    );
    assert.equal(r.status, EXIT.unavailable, r.stderr);
    assert.match(r.stderr, /redis: stores need the ioredis package, which is not installed/);
    assert.match(r.stderr, /npm install 'ioredis@\^5\.3\.0 \|\| \^6\.0\.0'/);
  });
});
