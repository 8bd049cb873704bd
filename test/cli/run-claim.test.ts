import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { startUpstream, type Upstream } from '../fencing/gateway/support.js';
import { finished, killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { uniqueKey } from '../support/keys.js';
import { freePort } from '../support/ports.js';
import { tempDir } from '../support/tmp.js';

// `leasehold run KEY --claim URL -- cmd` with real processes: a real gateway process (SQLite
// marks) in front of a real upstream. The run claims its token at the gateway before the
// command starts; a refused or unreachable claim releases the lease, never starts the command,
// and says which fence and why (exit code, one line on stderr, --json).

const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });

/** The last line of stdout as JSON (run --json prints its summary last). */
function lastJson(out: string): Record<string, unknown> {
  const lines = out.trim().split('\n');
  return JSON.parse(lines[lines.length - 1] ?? '') as Record<string, unknown>;
}

// The command: reads the gateway's mark for its scope before writing anything (the claim must
// already be there), then makes its one fenced write, and leaves a file to show it ran.
const JOB = `
const [gw, scope, id, ranFile] = process.argv.slice(2);
const token = process.env.LEASEHOLD_TOKEN;
const m = await (await fetch(gw + '/_leasehold/marks?scope=' + encodeURIComponent(scope))).json();
const put = await fetch(gw + '/reports/' + id, { method: 'PUT', headers: { 'fencing-token': token }, body: 'by ' + token });
(await import('node:fs')).writeFileSync(ranFile, 'ran');
console.log(JSON.stringify({ markBeforeWrite: m.highWaterMark, token, put: put.status }));
`;

describe('leasehold run --claim (real gateway and upstream processes)', () => {
  const tmp = tempDir('cli-run-claim');
  const storeUrl = `sqlite:${join(tmp.dir, 'leases.db')}`;
  const job = join(tmp.dir, 'job.mjs');
  let up: Upstream;
  let gateway: CliProcess;
  let gw: string;
  let store: SqliteLeaseStore;

  before(async () => {
    writeFileSync(job, JOB);
    up = await startUpstream();
    gateway = spawnCli(
      [
        'gateway',
        '--listen',
        '127.0.0.1:0',
        '--log-level',
        'warn',
        '--upstream',
        up.url,
        '--marks',
        'sqlite:./gw-marks.db',
        '--route',
        'PUT /reports/:id=report/{id}',
      ],
      { cwd: tmp.dir },
    );
    gw = (await gateway.waitFor(/listening on (\S+)/, 30_000))[1]!;
    store = new SqliteLeaseStore({ path: join(tmp.dir, 'leases.db') });
  });
  after(async () => {
    killQuietly(gateway);
    await up?.close();
    await store?.close();
    tmp.remove();
  });

  const run = (key: string, claims: string[], ranFile: string, id: string) =>
    finished(
      spawnCli(
        [
          'run',
          key,
          '--ttl',
          '30s',
          '--store',
          storeUrl,
          '--json',
          ...claims.flatMap((c) => ['--claim', c]),
          '--',
          process.execPath,
          job,
          gw,
          `report/${id}`,
          id,
          ranFile,
        ],
        { cwd: tmp.dir },
      ),
    );

  it('claims the token at the gateway before the command starts; the command then writes', async () => {
    const id = uniqueKey('ok').replace(/\W/g, '');
    const key = `report/${id}`;
    const ran = join(tmp.dir, `${id}.ran`);
    const r = await run(key, [gw], ran, id);
    assert.equal(r.code, EXIT.ok, r.err);
    const lines = r.out.trim().split('\n');
    const seen = JSON.parse(lines[0]!) as { markBeforeWrite: string; token: string; put: number };
    assert.equal(seen.markBeforeWrite, seen.token, 'the mark was the token before any write');
    assert.equal(seen.put, 200);
    assert.equal(lastJson(r.out)['status'], 'exited');
    assert.deepEqual(
      up.log.filter((e) => e.path === `/reports/${id}`).map((e) => e.token),
      [seen.token],
    );
  });

  it('a newer holder already claimed: exit 79, one line naming the gateway, the lease released, the command never started', async () => {
    const id = uniqueKey('stale').replace(/\W/g, '');
    const key = `report/${id}`;
    const claimed = await fetch(`${gw}/_leasehold/claim`, {
      method: 'POST',
      body: JSON.stringify({ scope: key, token: '1000' }),
    });
    assert.equal(claimed.status, 200);
    const ran = join(tmp.dir, `${id}.ran`);
    const r = await run(key, [gw], ran, id);
    assert.equal(r.code, EXIT.lost, r.err);
    const errLines = r.err.trim().split('\n');
    assert.equal(errLines.length, 1, r.err);
    assert.match(
      errLines[0]!,
      new RegExp(`claim on ${gw.replace(/[.]/g, '\\.')} .*refused token 1: .*mark 1000`),
    );
    const summary = lastJson(r.out);
    assert.equal(summary['status'], 'claim_failed');
    assert.equal(summary['fence'], gw);
    assert.equal(summary['reason'], 'stale_fence');
    assert.equal(summary['highWaterMark'], '1000');
    assert.equal(summary['exitCode'], EXIT.lost);
    assert.equal(existsSync(ran), false, 'the command never started');
    assert.equal(up.count(`/reports/${id}`), 0);
    const state = await store.inspect(key, OPTS());
    assert.equal(state.lastToken, 1n, 'the lease was granted once');
    assert.equal(state.holder, undefined, 'and released');
  });

  it('an unreachable fence among several: exit 69 naming it, the lease released, the command never started', async () => {
    const id = uniqueKey('down').replace(/\W/g, '');
    const key = `report/${id}`;
    const down = `http://127.0.0.1:${await freePort()}`;
    const ran = join(tmp.dir, `${id}.ran`);
    const r = await run(key, [gw, down], ran, id);
    assert.equal(r.code, EXIT.unavailable, r.err);
    assert.match(r.err, new RegExp(`claim on ${down.replace(/[.]/g, '\\.')} .*unreachable`));
    const summary = lastJson(r.out);
    assert.equal(summary['status'], 'claim_failed');
    assert.equal(summary['fence'], down);
    assert.equal(summary['reason'], 'unavailable');
    assert.equal(existsSync(ran), false, 'the command never started');
    assert.equal((await store.inspect(key, OPTS())).holder, undefined, 'the lease was released');
  });

  it('a SQLite marks URL or a bad URL is a usage error (exit 64), and nothing is leased', async () => {
    for (const bad of ['sqlite:./gw-marks.db', 'ftp://x', 'not a url']) {
      const id = uniqueKey('bad').replace(/\W/g, '');
      const r = await run(`report/${id}`, [bad], join(tmp.dir, `${id}.ran`), id);
      assert.equal(r.code, EXIT.usage, `${bad}: ${r.err}`);
      assert.equal((await store.inspect(`report/${id}`, OPTS())).lastToken, 0n);
    }
  });
});
