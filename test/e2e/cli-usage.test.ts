import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { spawnCli } from '../support/cli.js';
import { tempDir } from '../support/tmp.js';

/** Runs the built CLI to its end and returns its exit code and all it printed. */
async function cli(cwd: string, ...args: string[]): Promise<{ code: number; err: string }> {
  const p = spawnCli(args, { cwd });
  // 'close' comes after the last byte of stdout and stderr; 'exit' may come before it.
  const closed = new Promise<void>((resolve) => p.child.once('close', () => resolve()));
  const code = await p.exited;
  await closed;
  return { code, err: p.stderr() };
}

describe('usage mistakes exit 64 in every command (real processes)', () => {
  const tmp = tempDir('cli-usage');
  after(() => tmp.remove());

  it('demo --ttl 5 is 5 ms, refused as below the 100 ms minimum, in one message that agrees with itself', async () => {
    const r = await cli(tmp.dir, 'demo', '--ttl', '5');
    assert.equal(r.code, EXIT.usage, r.err);
    assert.equal(r.err.trim(), 'leasehold demo: --ttl must be at least 100ms, got 5ms');
  });

  it('demo exits 64 for options that cannot work or are malformed', async () => {
    for (const args of [
      ['--ttl', '3s', '--renew-every', '3s'],
      ['--pause', 'soon'],
      ['--fault', 'meteor'],
      ['--first-token', '0'],
      ['--real', '--json'],
    ]) {
      const r = await cli(tmp.dir, 'demo', ...args);
      assert.equal(r.code, EXIT.usage, `${args.join(' ')}: ${r.err}`);
      assert.match(r.err, /^leasehold demo: /, args.join(' '));
    }
  });

  it('check exits 64 for a bad option or a history it cannot read, and 1 only for violations', async () => {
    const bad = await cli(tmp.dir, 'check', '-', '--lin-budget', 'x');
    assert.equal(bad.code, EXIT.usage, bad.err);
    assert.match(bad.err, /--lin-budget must be a positive integer, got x/);
    const missing = await cli(tmp.dir, 'check', join(tmp.dir, 'nope.jsonl'));
    assert.equal(missing.code, EXIT.usage, missing.err);
    assert.match(missing.err, /cannot read/);
    const broken = join(tmp.dir, 'broken.jsonl');
    writeFileSync(broken, '{"type":"meta","version":1}\n{"type":"write","phase":"ok"}\n');
    const invalid = await cli(tmp.dir, 'check', broken);
    assert.equal(invalid.code, EXIT.usage, invalid.err);
    assert.match(invalid.err, /line 2/);
  });

  it('sim exits 64 for a malformed seed or an unknown bug', async () => {
    const seed = await cli(tmp.dir, 'sim', 'run', '--seed', 'x');
    assert.equal(seed.code, EXIT.usage, seed.err);
    assert.match(seed.err, /--seed must be an integer/);
    const bug = await cli(tmp.dir, 'sim', 'run', '--seed', '1', '--bug', 'meteor');
    assert.equal(bug.code, EXIT.usage, bug.err);
  });

  it('the client commands and commander itself already exit 64', async () => {
    const ttl = await cli(tmp.dir, 'acquire', 'k', '--ttl', '5', '--store', 'memory:');
    assert.equal(ttl.code, EXIT.usage, ttl.err);
    assert.equal((await cli(tmp.dir, 'demo', '--no-such-flag')).code, EXIT.usage);
    assert.equal((await cli(tmp.dir, 'check')).code, EXIT.usage, 'missing argument');
  });
});
