import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.js';

/** The checkout (this file runs from build/test/e2e/). */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

/**
 * What a library user sees who imports a subpath without the optional package it needs. The
 * compiled package goes into a project's node_modules with only its hard dependencies beside
 * it, so the optional ones are really absent, as after `npm i leasehold`.
 */
describe('a subpath whose optional package is not installed', () => {
  const tmp = tempDir('missing-pkgs');
  before(() => {
    const pkg = join(tmp.dir, 'node_modules', 'leasehold');
    mkdirSync(pkg, { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
    cpSync(join(ROOT, 'build', 'src'), join(pkg, 'dist'), { recursive: true });
    for (const dep of Object.keys(PKG.dependencies)) {
      symlinkSync(
        realpathSync(join(ROOT, 'node_modules', dep)),
        join(tmp.dir, 'node_modules', dep),
      );
    }
    writeFileSync(
      join(tmp.dir, 'package.json'),
      JSON.stringify({ name: 'app', private: true, type: 'module' }),
    );
  });
  after(() => tmp.remove());

  /** Imports each subpath in a fresh process; what each import threw (or `ok`). */
  function importEach(subpaths: readonly string[]): Record<string, Record<string, string> | 'ok'> {
    const script = `
      const out = {};
      for (const s of ${JSON.stringify(subpaths)}) {
        try { await import(s); out[s] = 'ok'; }
        catch (e) { out[s] = { name: e.name, code: e.code, message: e.message }; }
      }
      console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: tmp.dir,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as Record<string, Record<string, string> | 'ok'>;
  }

  it('throws a LeaseholdError naming the package and the command that installs it', () => {
    const pg =
      'the package pg, used by leasehold/postgres and leasehold/fencing/postgres, is not installed: npm install pg@^8.11.0';
    const expected: Record<string, string> = {
      'leasehold/postgres': pg,
      'leasehold/fencing/postgres': pg,
      'leasehold/redis':
        "the package ioredis, used by leasehold/redis, is not installed: npm install 'ioredis@^5.3.0 || ^6.0.0'",
      'leasehold/etcd':
        'the package etcd3, used by leasehold/etcd, is not installed: npm install etcd3@^1.1.2',
      'leasehold/sqlite':
        'the package better-sqlite3, used by leasehold/sqlite, is not installed: npm install better-sqlite3@^12.4.0',
      'leasehold/server':
        'the packages fastify, pino, prom-client, used by leasehold/server, are not installed: npm install fastify@^5.6.0 pino@^10.0.0 prom-client@^15.1.0',
      'leasehold/metrics':
        'the package prom-client, used by leasehold/metrics, is not installed: npm install prom-client@^15.1.0',
    };
    const got = importEach(Object.keys(expected));
    for (const [subpath, message] of Object.entries(expected)) {
      assert.deepEqual(
        got[subpath],
        { name: 'LeaseholdError', code: 'ERR_UNAVAILABLE', message },
        subpath,
      );
    }
  });

  it('the core, the memory store and the HTTP client still import', () => {
    const got = importEach([
      'leasehold',
      'leasehold/memory',
      'leasehold/http',
      'leasehold/testing',
    ]);
    assert.deepEqual(Object.values(got), ['ok', 'ok', 'ok', 'ok'], JSON.stringify(got));
  });
});
