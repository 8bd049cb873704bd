import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { startUpstream, type Upstream } from '../fencing/gateway/support.js';
import { finished, killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { freePort } from '../support/ports.js';
import { startServeProcess, type ServeProcess } from '../support/serve-process.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

/** Stops a gateway with SIGTERM and returns all it wrote to stderr once it has exited. */
async function stopped(p: CliProcess): Promise<string> {
  const closed = new Promise<void>((resolve) => p.child.once('close', () => resolve()));
  p.child.kill('SIGTERM');
  assert.equal(await p.exited, EXIT.ok, p.stderr());
  await closed;
  return p.stderr();
}

const lines = (text: string): string[] => text.split('\n').filter((l) => l.trim() !== '');

const ROUTE = 'PUT /reports/:id=report/{id}';

describe('leasehold gateway checks its mark store and upstream at start (real processes)', () => {
  const tmp = tempDir('gateway-start');
  const procs: CliProcess[] = [];
  const upstreams: Upstream[] = [];
  let server: ServeProcess | undefined;
  const gateway = (args: string[]): CliProcess => {
    const p = spawnCli(
      ['gateway', '--listen', '127.0.0.1:0', '--log-level', 'warn', '--route', ROUTE, ...args],
      { cwd: tmp.dir },
    );
    procs.push(p);
    return p;
  };
  const upstream = async (): Promise<Upstream> => {
    const u = await startUpstream();
    upstreams.push(u);
    return u;
  };
  after(async () => {
    for (const p of procs) killQuietly(p);
    for (const u of upstreams) await u.close();
    await server?.stop();
    tmp.remove();
  });

  for (const [kind, scheme] of [
    ['PostgreSQL', 'postgres://postgres@'],
    ['Redis', 'redis://'],
  ] as const) {
    it(`exits 69 with one line naming host, port and cause when ${kind} marks are unreachable`, async () => {
      const up = await upstream();
      const port = await freePort();
      const r = await finished(
        gateway(['--upstream', up.url, '--marks', `${scheme}127.0.0.1:${port}/test`]),
      );
      assert.equal(r.code, EXIT.unavailable, r.err);
      assert.doesNotMatch(r.out, /listening/);
      assert.equal(lines(r.err).length, 1, r.err);
      assert.match(
        r.err,
        new RegExp(`${kind} mark store at 127\\.0\\.0\\.1:${port} \\(connection refused\\)`),
      );
      assert.match(r.err, /--wait-for-marks/);
    });
  }

  it('starts with an unreachable upstream, warns once naming it, and answers 502 per request', async () => {
    const port = await freePort();
    const upstreamUrl = `http://127.0.0.1:${port}`;
    const p = gateway(['--upstream', upstreamUrl, '--marks', 'sqlite:./unreachable-upstream.db']);
    const url = (await p.waitFor(/listening on (\S+)/, 30_000))[1]!;
    for (const token of ['7', '8']) {
      const res = await fetch(`${url}/reports/july`, {
        method: 'PUT',
        headers: { 'fencing-token': token },
        body: 'x',
      });
      assert.equal(res.status, 502, await res.text());
    }
    const err = await stopped(p);
    const warnings = lines(err).filter((l) => /warning/.test(l));
    assert.equal(warnings.length, 1, err);
    assert.match(warnings[0]!, new RegExp(`upstream ${upstreamUrl} .*connection refused`));
    assert.match(warnings[0]!, /502/);
  });

  it('says nothing more when the upstream answers', async () => {
    const up = await upstream();
    const p = gateway(['--upstream', up.url, '--marks', 'sqlite:./reachable.db']);
    await p.waitFor(/listening on/, 30_000);
    assert.deepEqual(lines(await stopped(p)), [
      'leasehold gateway: SIGTERM received, shutting down',
    ]);
  });

  it('warns on 0.0.0.0 without auth, naming the risk and --allow-no-auth; not with it', async () => {
    const up = await upstream();
    const open = spawnCli(
      [
        'gateway',
        '--listen',
        '0.0.0.0:0',
        '--log-level',
        'warn',
        '--route',
        ROUTE,
        '--upstream',
        up.url,
        '--marks',
        'sqlite:./open.db',
      ],
      { cwd: tmp.dir },
    );
    procs.push(open);
    await open.waitFor(/listening on/, 30_000);
    const warnings = lines(await stopped(open)).filter((l) => /warning/.test(l));
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0]!, /0\.0\.0\.0 without auth/);
    assert.match(warnings[0]!, /--allow-no-auth/);
    const allowed = spawnCli(
      [
        'gateway',
        '--listen',
        '0.0.0.0:0',
        '--log-level',
        'warn',
        '--route',
        ROUTE,
        '--upstream',
        up.url,
        '--marks',
        'sqlite:./open.db',
        '--allow-no-auth',
      ],
      { cwd: tmp.dir },
    );
    procs.push(allowed);
    await allowed.waitFor(/listening on/, 30_000);
    assert.doesNotMatch(await stopped(allowed), /warning/);
  });

  it('--report names the resource after the upstream by default, so the dashboard shows it', async () => {
    server = await startServeProcess('memory:', tmp.dir);
    const up = await upstream();
    const p = gateway([
      '--upstream',
      up.url,
      '--marks',
      'sqlite:./report.db',
      '--report',
      server.url,
    ]);
    const url = (await p.waitFor(/listening on (\S+)/, 30_000))[1]!;
    const res = await fetch(`${url}/reports/july`, {
      method: 'PUT',
      headers: { 'fencing-token': '42' },
      body: 'x',
    });
    assert.equal(res.status, 200, await res.text());
    const fence = await eventually(
      'the fence event at the server',
      async () => {
        const recent = (await (await fetch(`${server!.url}/v1/events/recent`)).json()) as {
          events: { type: string; resource?: string }[];
        };
        return recent.events.find((e) => e.type === 'fence');
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(fence.resource, new URL(up.url).host);
    await stopped(p);
  });
});
