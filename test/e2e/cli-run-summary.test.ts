import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { LeaseClient } from '../../src/core/client.js';
import type { LeaseStore } from '../../src/core/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { spawnCli } from '../support/cli.js';
import { uniqueKey } from '../support/keys.js';
import { tempDir } from '../support/tmp.js';

const NODE = process.execPath;
const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });

/** Runs the built CLI to its end and returns its exit code and all it printed. */
async function cli(
  cwd: string,
  ...args: string[]
): Promise<{ code: number; out: string; err: string }> {
  const p = spawnCli(args, { cwd });
  const closed = new Promise<void>((resolve) => p.child.once('close', () => resolve()));
  const code = await p.exited;
  await closed;
  return { code, out: p.stdout(), err: p.stderr() };
}

/** The last line of stdout as JSON: run --json prints its summary after the command's output. */
function lastJson(out: string): Record<string, unknown> {
  const lines = out.trim().split('\n');
  return JSON.parse(lines[lines.length - 1] ?? '') as Record<string, unknown>;
}

describe('leasehold run: the key forgotten, and --json (real processes)', () => {
  const tmp = tempDir('cli-run-summary');
  const db = join(tmp.dir, 'leases.db');
  const storeUrl = `sqlite:${db}`;
  let store: LeaseStore;
  before(() => {
    store = new SqliteLeaseStore({ path: db });
  });
  after(async () => {
    await store.close();
    tmp.remove();
  });

  it('refuses `run --ttl 30s -- CMD` with no key before -- (exit 64) and leases nothing named after the command', async () => {
    const script = join(tmp.dir, `job-${process.pid}.mjs`);
    const r = await cli(
      tmp.dir,
      'run',
      '--ttl',
      '30s',
      '--store',
      storeUrl,
      '--',
      NODE,
      script,
      '--month',
      'july',
    );
    assert.equal(r.code, EXIT.usage, r.err);
    assert.match(r.err, /run needs a KEY before --/);
    for (const key of [NODE, script]) {
      const state = await store.inspect(key, OPTS());
      assert.equal(state.lastToken, 0n, `no lease was ever granted on ${key}`);
    }
  });

  it('still takes the key when options come between it and --', async () => {
    const key = uniqueKey('run-key-after-options');
    const r = await cli(
      tmp.dir,
      'run',
      '--ttl',
      '30s',
      '--store',
      storeUrl,
      key,
      '-q',
      '--',
      NODE,
      '-e',
      'console.log(process.env.LEASEHOLD_KEY)',
    );
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out.trim(), key);
  });

  it('--json prints one summary line after the command output: status, key, token, exit code', async () => {
    const key = uniqueKey('run-json');
    const r = await cli(
      tmp.dir,
      'run',
      key,
      '--ttl',
      '30s',
      '--store',
      storeUrl,
      '--json',
      '--',
      NODE,
      '-e',
      'console.log("from the command"); process.exit(3)',
    );
    assert.equal(r.code, 3, r.err);
    assert.equal(r.out.split('\n')[0], 'from the command');
    const summary = lastJson(r.out);
    const state = await store.inspect(key, OPTS());
    assert.deepEqual(summary, {
      status: 'exited',
      key,
      exitCode: 3,
      token: state.lastToken.toString(),
      code: 3,
      signal: null,
      released: true,
    });
  });

  it('--json reports busy with the holder and exit code 75, without running the command', async () => {
    const key = uniqueKey('run-json-busy');
    const client = new LeaseClient({ store, ownerId: 'summary-holder' });
    try {
      const held = await client.acquire(key, { ttl: '30s' });
      assert.equal(held.status, 'acquired');
      const r = await cli(
        tmp.dir,
        'run',
        key,
        '--ttl',
        '30s',
        '--store',
        storeUrl,
        '--json',
        '-q',
        '--',
        NODE,
        '-e',
        'console.log("ran")',
      );
      assert.equal(r.code, EXIT.busy, r.err);
      assert.doesNotMatch(r.out, /^ran$/m);
      const summary = lastJson(r.out);
      assert.equal(summary['status'], 'busy');
      assert.equal(summary['exitCode'], EXIT.busy);
      assert.equal((summary['holder'] as { ownerId: string }).ownerId, 'summary-holder');
    } finally {
      await client.close();
    }
  });
});
