import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

async function post(
  url: string,
  path: string,
  body: unknown,
  token?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('leasehold serve (the npm start command, as a real process)', () => {
  const tmp = tempDir('serve');
  const procs: CliProcess[] = [];
  const serve = (args: string[]): CliProcess => {
    const p = spawnCli(['serve', ...args], { cwd: tmp.dir });
    procs.push(p);
    return p;
  };
  after(() => {
    for (const p of procs) killQuietly(p);
    tmp.remove();
  });

  it('starts on SQLite, prints its address, grants and releases over HTTP, and stops on SIGTERM', async () => {
    const db = join(tmp.dir, 'explicit.db');
    const p = serve(['--port', '0', '--store', `sqlite:${db}`]);
    const url = (await p.waitFor(/leasehold listening on (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
    const a = await post(url, '/v1/acquire', { key: 'e2e/a', ttl: '30s', ownerId: 'curl' });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(a.body['token'], '1');
    const busy = await post(url, '/v1/acquire', { key: 'e2e/a', ttl: '30s' });
    assert.equal(busy.status, 409);
    const r = await post(url, '/v1/release', {
      key: 'e2e/a',
      leaseId: a.body['leaseId'],
      token: a.body['token'],
    });
    assert.equal(r.status, 200);
    const again = await post(url, '/v1/acquire', { key: 'e2e/a', ttl: '30s' });
    assert.equal(again.body['token'], '2', 'tokens keep increasing after a release');
    const dash = await fetch(`${url}/`);
    assert.equal(dash.status, 200);
    assert.match(await dash.text(), /leasehold — live leases/);
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0, p.stderr());
    assert.ok(existsSync(db), 'the leases live in the SQLite file');
  });

  it('uses ./leasehold.db when no store is given, and keeps tokens across a restart', async () => {
    const first = serve(['--port', '0']);
    const url1 = (await first.waitFor(/listening on (\S+)/))[1]!;
    assert.match(first.stdout(), /store: sqlite:\.\/leasehold\.db/);
    const a = await post(url1, '/v1/acquire', { key: 'e2e/restart', ttl: '30s' });
    first.child.kill('SIGTERM');
    assert.equal(await first.exited, 0);
    assert.ok(existsSync(join(tmp.dir, 'leasehold.db')));
    const second = serve(['--port', '0']);
    const url2 = (await second.waitFor(/listening on (\S+)/))[1]!;
    const state = (await (await fetch(`${url2}/v1/leases/e2e%2Frestart`)).json()) as {
      holder: { token: string } | null;
    };
    assert.equal(
      state.holder?.token,
      a.body['token'],
      'the lease outlived the server: it lives in the store',
    );
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0);
  });

  it('shuts down gracefully: a waiting acquire is answered 503 unavailable and the process exits 0', async () => {
    const p = serve(['--port', '0', '--store', 'memory:']);
    const url = (await p.waitFor(/listening on (\S+)/))[1]!;
    const held = await post(url, '/v1/acquire', { key: 'e2e/shutdown', ttl: '60s' });
    assert.equal(held.status, 200);
    const waiting = post(url, '/v1/acquire', { key: 'e2e/shutdown', ttl: '5s', wait: '60s' });
    // Parked: answered busy, subscribed, and re-checked once more.
    const metric = async (): Promise<number> => {
      const text = await (await fetch(`${url}/metrics`)).text();
      return Number(
        /^leasehold_store_request_seconds_count\{[^}]*op="acquire"[^}]*\} (\d+)/m.exec(text)?.[1] ??
          0,
      );
    };
    await eventually('the acquire to park', async () => ((await metric()) >= 2 ? true : undefined));
    p.child.kill('SIGTERM');
    const answer = await waiting;
    assert.equal(answer.status, 503);
    assert.equal((answer.body['error'] as { code: string }).code, 'unavailable');
    assert.equal(await p.exited, 0, p.stderr());
  });

  it('keeps every answered token after kill -9 mid-load: tokens after the restart exceed them', async () => {
    const db = join(tmp.dir, 'crash.db');
    const first = serve(['--port', '0', '--log-level', 'warn', '--store', `sqlite:${db}`]);
    const url1 = (await first.waitFor(/listening on (\S+)/))[1]!;
    const keys = Array.from({ length: 8 }, (_, i) => `e2e/crash/${i}`);
    const answered = new Map<string, bigint>();
    const falls: string[] = []; // grants whose token did not rise above the key's last one
    const failures: unknown[] = []; // errors other than the killed server's refused connections
    let grants = 0;
    let killed = false;
    // Eight clients acquire and release their key in a loop; the server is killed (SIGKILL,
    // no shutdown) once 300 grants were answered, with requests in flight.
    await Promise.all(
      keys.map(async (key) => {
        for (let i = 0; i < 10_000 && !killed && failures.length === 0; i++) {
          try {
            const a = await post(url1, '/v1/acquire', { key, ttl: '2s' });
            if (a.status !== 200) continue;
            const token = BigInt(a.body['token'] as string);
            const before = answered.get(key) ?? 0n;
            if (token <= before) falls.push(`${key}: token ${token} after ${before}`);
            answered.set(key, token);
            if (++grants === 300) {
              killed = true;
              first.child.kill('SIGKILL');
              return;
            }
            await post(url1, '/v1/release', {
              key,
              leaseId: a.body['leaseId'],
              token: a.body['token'],
            });
          } catch (err) {
            // fetch rejects with a TypeError once the killed server's sockets close; anything
            // else, or any error before the kill, is a failure of the run.
            if (!(killed && err instanceof TypeError)) failures.push(err);
            return;
          }
        }
      }),
    );
    // Every loop ended: if none reached 300 grants the server still runs; kill it so that
    // `exited` settles and the assertions below report why.
    if (!killed) first.child.kill('SIGKILL');
    assert.deepEqual(failures, [], 'client errors before the kill');
    assert.deepEqual(falls, [], 'tokens rise on every key');
    assert.ok(killed, `the server was killed after 300 grants (${grants} answered)`);
    assert.equal(await first.exited, 137);
    const second = serve(['--port', '0', '--log-level', 'warn', '--store', `sqlite:${db}`]);
    const url2 = (await second.waitFor(/listening on (\S+)/))[1]!;
    for (const [key, token] of answered) {
      // A grant of the killed server may still be live: wait it out (ttl 2s).
      const a = await post(url2, '/v1/acquire', { key, ttl: '5s', wait: '10s' });
      assert.equal(a.status, 200, JSON.stringify(a.body));
      const after = BigInt(a.body['token'] as string);
      assert.ok(after > token, `${key}: ${after} after the restart, ${token} answered before`);
    }
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0);
  });

  it('reads auth tokens and the store from --config', async () => {
    const config = join(tmp.dir, 'leasehold.json');
    writeFileSync(
      config,
      JSON.stringify({
        store: 'sqlite:./from-config.db',
        listen: { port: 0 },
        auth: { tokens: [{ name: 'ci', token: 'ci-secret-0123456789abcdef', prefixes: ['ci/'] }] },
        logLevel: 'warn',
      }),
    );
    const p = serve(['--config', config]);
    const url = (await p.waitFor(/listening on (\S+)/))[1]!;
    assert.equal((await post(url, '/v1/acquire', { key: 'ci/a', ttl: '5s' })).status, 401);
    assert.equal(
      (await post(url, '/v1/acquire', { key: 'ci/a', ttl: '5s' }, 'ci-secret-0123456789abcdef'))
        .status,
      200,
    );
    assert.equal(
      (await post(url, '/v1/acquire', { key: 'other/a', ttl: '5s' }, 'ci-secret-0123456789abcdef'))
        .status,
      403,
    );
    assert.ok(existsSync(join(tmp.dir, 'from-config.db')));
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
  });
});
