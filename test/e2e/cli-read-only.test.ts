import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { EXIT } from '../../src/cli/exit-codes.js';
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
