import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { tempDir } from '../support/tmp.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const EXAMPLES = join(ROOT, 'examples');

/**
 * The HTTP examples in examples/ (Python with the standard library, curl) run as a user would
 * run them, against a real `leasehold serve` on the default SQLite store.
 */
describe('the HTTP API examples', () => {
  const tmp = tempDir('examples');
  let serve: CliProcess | undefined;
  let url = '';

  before(async () => {
    serve = spawnCli(['serve', '--port', '0'], { cwd: tmp.dir });
    url = (await serve.waitFor(/listening on (http:\/\/\S+)/, 60_000))[1]!;
  });
  after(async () => {
    if (serve !== undefined && serve.child.exitCode === null) {
      serve.child.kill('SIGTERM');
      const code = await serve.exited;
      // A clean shutdown on SIGTERM: the server released what it held and closed the store.
      assert.equal(code, 0, serve.stderr());
    }
    killQuietly(serve);
    tmp.remove();
  });

  const run = (cmd: string, args: string[]): string => {
    const r = spawnSync(cmd, args, {
      cwd: tmp.dir,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, LEASEHOLD_URL: url },
    });
    assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.stdout}${r.stderr}`);
    return r.stdout;
  };
  const tokenOf = (out: string, re: RegExp): bigint => {
    const m = re.exec(out);
    assert.ok(m, out);
    return BigInt(m[1]!);
  };

  it('python: acquires, is exclusive, renews and releases; a second run gets a larger token', () => {
    const script = join(EXAMPLES, 'python', 'lease.py');
    const first = run('python3', [script, 'jobs/py']);
    assert.match(first, /^a second owner is refused: 409 busy$/m);
    assert.match(first, /^renewed: renewed$/m);
    assert.match(first, /^released: released$/m);
    // Released, not left to expire: the next run acquires at once (its wait is 5 s, the TTL 30 s).
    const second = run('python3', [script, 'jobs/py']);
    const re = /^acquired jobs\/py with token (\d+)$/m;
    assert.ok(tokenOf(second, re) > tokenOf(first, re), `${first}\n${second}`);
  });

  it('curl: the same session, answers as the server sent them', () => {
    const script = join(EXAMPLES, 'curl', 'session.sh');
    const first = run('sh', [script, 'jobs/curl']);
    assert.match(first, /^acquire: \{"status":"acquired","key":"jobs\/curl",.*"token":"\d+"/m);
    assert.match(first, /^second owner: \{"error":\{"code":"busy".* HTTP 409$/m);
    assert.match(first, /^renew: \{"status":"renewed"/m);
    assert.match(first, /^release: \{"status":"released"\}$/m);
    const second = run('sh', [script, 'jobs/curl']);
    const re = /^acquire: .*"token":"(\d+)"/m;
    assert.ok(tokenOf(second, re) > tokenOf(first, re), `${first}\n${second}`);
  });
});
