import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { slotKey } from '../../src/core/slot-keys.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { uniqueKey } from '../support/keys.js';
import { tempDir } from '../support/tmp.js';

const NODE = process.execPath;

/** A child that prints its slot and token, then waits for SIGTERM. */
const SLOT_CHILD = `
  process.on('SIGTERM', () => process.exit(0));
  console.log('slot=' + process.env.LEASEHOLD_SLOT + ' token=' + process.env.LEASEHOLD_TOKEN + ' key=' + process.env.LEASEHOLD_KEY);
  setInterval(() => {}, 1000);
`;

describe('leasehold run --slots (real processes)', () => {
  const tmp = tempDir('cli-run-slots');
  const storeUrl = `sqlite:${join(tmp.dir, 'leases.db')}`;
  const procs: CliProcess[] = [];
  const run = (args: string[]): CliProcess => {
    const p = spawnCli(args, { cwd: tmp.dir });
    procs.push(p);
    return p;
  };
  after(() => {
    for (const p of procs) killQuietly(p);
    tmp.remove();
  });

  it('runs at most N commands at once, each with its own LEASEHOLD_SLOT; the next is busy (75), and a freed slot is released', async () => {
    const name = uniqueKey('run-slots');
    const args = ['run', name, '--slots', '2', '--ttl', '30s', '--store', storeUrl];
    const a = run([...args, '--', NODE, '-e', SLOT_CHILD]);
    const b = run([...args, '--', NODE, '-e', SLOT_CHILD]);
    const seen = await Promise.all(
      [a, b].map((p) => p.waitFor(/slot=(\d+) token=(\d+) key=(\S+)/, 20_000)),
    );
    assert.deepEqual(seen.map((m) => Number(m[1])).sort(), [0, 1], 'two commands, two slots');
    for (const m of seen) assert.equal(m[3], slotKey(name, Number(m[1])));
    const c = run([...args, '--json', '--', NODE, '-e', 'console.log("must not run")']);
    assert.equal(await c.exited, EXIT.busy, c.stderr());
    assert.doesNotMatch(c.stdout(), /must not run/);
    a.child.kill('SIGTERM');
    assert.equal(await a.exited, 0, a.stderr());
    // A's slot was released at once: a third command gets it without waiting out the TTL.
    const d = run([
      ...args,
      '--json',
      '--',
      NODE,
      '-e',
      'console.log("slot=" + process.env.LEASEHOLD_SLOT)',
    ]);
    assert.equal(await d.exited, 0, d.stderr());
    assert.match(d.stdout(), new RegExp(`slot=${seen[0]![1]}`));
    const summary = JSON.parse(d.stdout().trim().split('\n').at(-1)!) as {
      slot: number;
      token: string;
    };
    assert.equal(summary.slot, Number(seen[0]![1]));
    assert.ok(BigInt(summary.token) > BigInt(seen[0]![2]!), 'the slot token grew');
    b.child.kill('SIGTERM');
    assert.equal(await b.exited, 0, b.stderr());
    const store = new SqliteLeaseStore({ path: join(tmp.dir, 'leases.db') });
    const live = await store.list(`${name}#slot=`, 10, {
      timeoutMs: 5000,
      signal: AbortSignal.timeout(5000),
    });
    await store.close();
    assert.deepEqual(live, [], 'every slot released');
  });

  it('refuses a bad --slots with exit 64', async () => {
    const p = run([
      'run',
      uniqueKey('run-slots-bad'),
      '--slots',
      '0',
      '--ttl',
      '30s',
      '--store',
      storeUrl,
      '--',
      NODE,
      '-e',
      '0',
    ]);
    assert.equal(await p.exited, EXIT.usage, p.stderr());
    assert.match(p.stderr(), /slots/);
  });
});
