import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import { CLI } from '../support/cli.js';
import { tempDir } from '../support/tmp.js';

/**
 * Reports on stderr every store driver package the child process loaded: a module hook sees
 * each import of one (Node 20.6+ runs it for every import, static or dynamic), and at exit the
 * CommonJS module cache shows the ones loaded with \`require\` (leasehold loads its optional
 * packages that way, so that a missing one is named in leasehold's own error).
 */
const HOOK = `
import { createRequire, register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
  export async function resolve(specifier, context, next) {
    if (/^(pg|etcd3|ioredis)(\\\\/|$)/.test(specifier)) process.stderr.write('DRIVER ' + specifier + '\\\\n');
    return next(specifier, context);
  }\`));
const cache = createRequire(process.cwd() + '/').cache;
process.on('exit', () => {
  const loaded = new Set();
  for (const file of Object.keys(cache)) {
    const m = /[\\\\/]node_modules[\\\\/](pg|etcd3|ioredis)[\\\\/]/.exec(file);
    if (m) loaded.add(m[1]);
  }
  for (const name of loaded) process.stderr.write('DRIVER ' + name + '\\n');
});
`;

function drivers(args: string[], cwd: string): { code: number; loaded: string[]; out: string } {
  const r = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(HOOK)}`, ...args],
    { cwd, encoding: 'utf8', timeout: 60_000 },
  );
  const loaded = [...r.stderr.matchAll(/^DRIVER (\S+)/gm)].map((m) => m[1]!);
  return { code: r.status ?? -1, loaded, out: r.stdout + r.stderr };
}

describe('store drivers load lazily', () => {
  const tmp = tempDir('lazy');
  after(() => tmp.remove());

  it('a SQLite user of the CLI never loads pg, etcd3 or ioredis', () => {
    const r = drivers(
      [CLI, 'status', 'some/key', '--store', `sqlite:${join(tmp.dir, 'x.db')}`],
      tmp.dir,
    );
    // A read-only command on a file that does not exist yet: refused, and still no driver.
    assert.equal(r.code, 69, r.out);
    assert.deepEqual(r.loaded, []);
  });

  it('openStore loads pg only for postgres:// and etcd3 only for etcd://', () => {
    const openStoreUrl = pathToFileURL(join(CLI, '..', '..', 'stores', 'open-store.js')).href;
    const script = (url: string): string =>
      `const { openStore } = await import(${JSON.stringify(openStoreUrl)});
       const s = await openStore(${JSON.stringify(url)}); await s.close();`;
    const sqlite = drivers(
      ['--input-type=module', '-e', script(`sqlite:${join(tmp.dir, 'y.db')}`)],
      tmp.dir,
    );
    assert.equal(sqlite.code, 0, sqlite.out);
    assert.deepEqual(sqlite.loaded, []);
    // Opening does not connect, so no server is needed to see which driver was loaded.
    const pg = drivers(
      ['--input-type=module', '-e', script('postgres://postgres@127.0.0.1:1/none?schema=lh_lazy')],
      tmp.dir,
    );
    assert.equal(pg.code, 0, pg.out);
    assert.ok(pg.loaded.includes('pg') && !pg.loaded.some((d) => d.startsWith('etcd3')), pg.out);
    const etcd = drivers(['--input-type=module', '-e', script('etcd://127.0.0.1:1')], tmp.dir);
    assert.equal(etcd.code, 0, etcd.out);
    assert.ok(etcd.loaded.includes('etcd3') && !etcd.loaded.includes('pg'), etcd.out);
  });
});
