import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * test/README.md cannot go false: every folder of test/ is in its table, and the tests under
 * test/core/ stay free of I/O (no sockets, files, database drivers or stores other than memory),
 * through the test files and the test/support files they import.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const TEST = join(ROOT, 'test');
const readme = readFileSync(join(TEST, 'README.md'), 'utf8');

/** Import specifiers that mean I/O in a test of test/core/. */
const IO_MODULES = [
  'node:net',
  'node:http',
  'node:https',
  'node:http2',
  'node:dgram',
  'node:fs',
  'node:fs/promises',
  'ioredis',
  'pg',
  'etcd3',
  'better-sqlite3',
  'undici',
  'fastify',
];
/** Source folders that open connections or files; memory is the one store core tests use. */
const IO_SOURCES = ['src/stores/', 'src/server/', 'src/fencing/', 'src/fault/', 'src/jobs/'];
const IO_SOURCE_ALLOWED = ['src/stores/memory/'];

function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files(path, out);
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

function specifiers(path: string): string[] {
  const text = readFileSync(path, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => m[1]!);
}

/** Why `path` (a test file or a support file it imports) is not I/O-free, or undefined. */
function ioReason(path: string, seen = new Set<string>()): string | undefined {
  if (seen.has(path)) return undefined;
  seen.add(path);
  for (const spec of specifiers(path)) {
    if (IO_MODULES.includes(spec)) return `${relative(ROOT, path)} imports ${spec}`;
    if (!spec.startsWith('.')) continue;
    const target = resolve(dirname(path), spec).replace(/\.js$/, '.ts');
    const rel = relative(ROOT, target).split('\\').join('/');
    if (
      IO_SOURCES.some((s) => rel.startsWith(s)) &&
      !IO_SOURCE_ALLOWED.some((s) => rel.startsWith(s))
    )
      return `${relative(ROOT, path)} imports ${rel}`;
    if (rel.startsWith('test/')) {
      const inner = ioReason(target, seen);
      if (inner) return inner;
    }
  }
  return undefined;
}

describe('test/ layout', () => {
  it('names every folder of test/ in test/README.md', () => {
    const folders = readdirSync(TEST).filter((n) => statSync(join(TEST, n)).isDirectory());
    assert.ok(folders.includes('core') && folders.includes('stores'));
    for (const folder of folders)
      assert.ok(readme.includes(`\`${folder}/`), `test/README.md's table names test/${folder}/`);
  });

  it('keeps test/core free of I/O', () => {
    const core = files(join(TEST, 'core')).filter((f) => f.endsWith('.test.ts'));
    assert.ok(core.length >= 5, 'test/core holds the I/O-free tests');
    const found = core.map((f) => ioReason(f)).filter((r): r is string => r !== undefined);
    assert.deepEqual(found, []);
  });

  it('catches a planted I/O import', () => {
    // The rule itself must be able to fail: a store test of SQLite is not I/O-free.
    const sqlite = files(join(TEST, 'stores', 'sqlite')).find((f) => f.endsWith('store.test.ts'));
    assert.ok(sqlite, 'test/stores/sqlite/store.test.ts exists');
    assert.match(ioReason(sqlite) ?? '', /imports/);
  });
});
