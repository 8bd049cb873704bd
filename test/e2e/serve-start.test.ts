import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { TEST_REDIS_URL } from '../contract/harnesses/redis.js';
import { finished, killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { freePort } from '../support/ports.js';
import { PG_URL, dropSchema, uniqueSchema } from '../support/postgres.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

/** Stops a server with SIGTERM and returns all it wrote to stderr once it has exited. */
async function stopped(p: CliProcess): Promise<string> {
  p.child.kill('SIGTERM');
  const r = await finished(p);
  assert.equal(r.code, EXIT.ok, r.err);
  return r.err;
}

/** The non-empty lines of a process's stderr. */
const lines = (text: string): string[] => text.split('\n').filter((l) => l.trim() !== '');

describe('leasehold serve checks its store before it listens (real processes)', () => {
  const tmp = tempDir('serve-start');
  const procs: CliProcess[] = [];
  const schemas: string[] = [];
  const serve = (args: string[]): CliProcess => {
    const p = spawnCli(['serve', '--port', '0', '--log-level', 'warn', ...args], { cwd: tmp.dir });
    procs.push(p);
    return p;
  };
  after(async () => {
    for (const p of procs) killQuietly(p);
    for (const s of schemas) await dropSchema(s);
    tmp.remove();
  });

  it('exits 69 with one line naming host, port and cause when PostgreSQL is unreachable', async () => {
    const port = await freePort();
    const r = await finished(serve(['--store', `postgres://postgres@127.0.0.1:${port}/test`]));
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.doesNotMatch(r.out, /listening/);
    assert.deepEqual(lines(r.err).length, 1, r.err);
    assert.match(
      r.err,
      new RegExp(`PostgreSQL lease store at 127\\.0\\.0\\.1:${port} \\(connection refused\\)`),
    );
    assert.match(r.err, /--wait-for-store/);
  });

  it('exits 69 with one line naming host, port and cause when Redis is unreachable', async () => {
    const port = await freePort();
    const r = await finished(serve(['--store', `redis://127.0.0.1:${port}`]));
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.doesNotMatch(r.out, /listening/);
    assert.deepEqual(lines(r.err).length, 1, r.err);
    assert.match(
      r.err,
      new RegExp(`Redis lease store at 127\\.0\\.0\\.1:${port} \\(connection refused\\)`),
    );
  });

  it('names a host that cannot be resolved, in one line, exit 69 (serve and a client command)', async () => {
    const url = 'postgres://postgres@base.invalid/test';
    const r = await finished(serve(['--store', url]));
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.deepEqual(lines(r.err).length, 1, r.err);
    assert.match(r.err, /PostgreSQL lease store at base\.invalid:5432/);
    assert.match(r.err, /the host name "base\.invalid" could not be resolved/);
    const status = await finished(spawnCli(['status', 'k', '--store', url], { cwd: tmp.dir }));
    assert.equal(status.code, EXIT.unavailable, status.err);
    assert.deepEqual(lines(status.err).length, 1, status.err);
    assert.match(status.err, /the host name "base\.invalid" could not be resolved/);
  });

  it('refuses an unknown scheme with the accepted ones, exit 64', async () => {
    const r = await finished(serve(['--store', 'mysql://db/app']));
    assert.equal(r.code, EXIT.usage, r.err);
    assert.match(r.err, /sqlite:, memory:, postgres:, postgresql:, etcd:, etcds:, redis:/);
  });

  it('starts as before when the store answers (PostgreSQL and Redis)', async () => {
    const schema = uniqueSchema('serve_start');
    schemas.push(schema);
    for (const store of [
      `${PG_URL}?schema=${schema}`,
      `${TEST_REDIS_URL}?prefix=test:serve-start:${process.pid}:`,
    ]) {
      const p = serve(['--store', store]);
      const url = (
        await p.waitFor(/leasehold listening on (http:\/\/127\.0\.0\.1:\d+)/, 30_000)
      )[1]!;
      assert.equal((await fetch(`${url}/readyz`)).status, 200, store);
      assert.equal(lines(await stopped(p)).length, 1, 'only the shutdown line on stderr');
    }
  });

  it('--wait-for-store keeps trying at start, says so once, and listens when the store comes up', async () => {
    const schema = uniqueSchema('serve_wait');
    schemas.push(schema);
    const port = await freePort();
    const p = serve([
      '--store',
      `postgres://postgres@127.0.0.1:${port}/test?schema=${schema}`,
      '--wait-for-store',
      '2m',
    ]);
    await eventually(
      'the waiting line',
      () => (/waiting up to 2m/.test(p.stderr()) ? true : undefined),
      {
        timeoutMs: 30_000,
      },
    );
    assert.match(p.stderr(), new RegExp(`PostgreSQL lease store at 127\\.0\\.0\\.1:${port}`));
    assert.doesNotMatch(p.stdout(), /listening/);
    // The store appears at the address serve was given: a proxy to the real PostgreSQL.
    const pg = new URL(PG_URL);
    const proxy = await TcpProxy.start({ host: pg.hostname, port: Number(pg.port || 5432) }, port);
    try {
      const url = (
        await p.waitFor(/leasehold listening on (http:\/\/127\.0\.0\.1:\d+)/, 60_000)
      )[1]!;
      assert.equal((await fetch(`${url}/readyz`)).status, 200);
      const err = await stopped(p);
      assert.equal(err.match(/waiting up to/g)?.length, 1, err);
    } finally {
      await proxy.close();
    }
  });

  it('--wait-for-store gives up after its bound with the same one line, exit 69', async () => {
    const port = await freePort();
    const started = performance.now();
    const r = await finished(
      serve(['--store', `redis://127.0.0.1:${port}`, '--wait-for-store', '1500ms']),
    );
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.ok(performance.now() - started >= 1500, 'it waited');
    assert.match(
      lines(r.err).at(-1)!,
      new RegExp(
        `Redis lease store at 127\\.0\\.0\\.1:${port} within 1\\.5s \\(connection refused\\)`,
      ),
    );
    const bad = await finished(serve(['--store', 'memory:', '--wait-for-store', 'soon']));
    assert.equal(bad.code, EXIT.usage, bad.err);
    assert.match(bad.err, /--wait-for-store/);
  });
});

describe('leasehold serve warns when it listens beyond loopback without auth', () => {
  const tmp = tempDir('serve-open');
  const procs: CliProcess[] = [];
  const serve = (args: string[]): CliProcess => {
    const p = spawnCli(
      ['serve', '--store', 'memory:', '--port', '0', '--log-level', 'warn', ...args],
      {
        cwd: tmp.dir,
      },
    );
    procs.push(p);
    return p;
  };
  after(() => {
    for (const p of procs) killQuietly(p);
    tmp.remove();
  });

  it('on 0.0.0.0 without auth: one warning naming the risk and how to silence it', async () => {
    const p = serve(['--host', '0.0.0.0']);
    await p.waitFor(/leasehold listening on/);
    const err = await stopped(p);
    const warnings = lines(err).filter((l) => /warning/.test(l));
    assert.equal(warnings.length, 1, err);
    assert.match(warnings[0]!, /0\.0\.0\.0 without auth/);
    assert.match(warnings[0]!, /anyone who can reach/);
    assert.match(warnings[0]!, /--allow-no-auth/);
    assert.match(warnings[0]!, /"auth"/);
  });

  it('says nothing on 127.0.0.1, with --allow-no-auth, or with auth tokens', async () => {
    const config = join(tmp.dir, 'auth.json');
    writeFileSync(
      config,
      JSON.stringify({
        auth: { tokens: [{ name: 'ci', token: 'ci-secret-0123456789abcdef', prefixes: [''] }] },
      }),
    );
    for (const args of [
      [],
      ['--host', '127.0.0.1'],
      ['--host', '0.0.0.0', '--allow-no-auth'],
      ['--host', '0.0.0.0', '--config', config],
    ]) {
      const p = serve(args);
      await p.waitFor(/leasehold listening on/);
      const err = await stopped(p);
      assert.doesNotMatch(err, /warning/, `${args.join(' ')}: ${err}`);
    }
  });
});
