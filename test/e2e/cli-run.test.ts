import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import type { LeaseStore } from '../../src/core/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import { killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

const NODE = process.execPath;
const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });

/** A child that prints what it got, then waits for SIGTERM and reports it. */
const LONG_CHILD = `
  process.on('SIGTERM', () => { console.log('child got SIGTERM'); process.exit(0); });
  console.log('started token=' + process.env.LEASEHOLD_TOKEN);
  setInterval(() => {}, 1000);
`;

describe('leasehold run (real processes)', () => {
  const tmp = tempDir('cli-run');
  const db = join(tmp.dir, 'leases.db');
  const storeUrl = `sqlite:${db}`;
  let store: LeaseStore;
  let client: LeaseClient;
  const procs: CliProcess[] = [];
  const run = (args: string[]): CliProcess => {
    const p = spawnCli(args, { cwd: tmp.dir });
    procs.push(p);
    return p;
  };

  before(() => {
    store = new SqliteLeaseStore({ path: db });
    client = new LeaseClient({ store, ownerId: 'test-client' });
  });
  after(async () => {
    for (const p of procs) killQuietly(p);
    await client.close();
    await store.close();
    tmp.remove();
  });

  it('passes LEASEHOLD_TOKEN, LEASEHOLD_LEASE_ID and LEASEHOLD_KEY to the command and releases the moment it exits', async () => {
    const key = uniqueKey('run-env');
    const p = run([
      'run',
      key,
      '--ttl',
      '30s',
      '--store',
      storeUrl,
      '--',
      NODE,
      '-e',
      'console.log(JSON.stringify({ t: process.env.LEASEHOLD_TOKEN, i: process.env.LEASEHOLD_LEASE_ID, k: process.env.LEASEHOLD_KEY }))',
    ]);
    assert.equal(await p.exited, 0, p.stderr());
    const seen = JSON.parse(p.stdout().trim()) as { t: string; i: string; k: string };
    assert.equal(seen.k, key);
    assert.match(seen.t, /^[1-9][0-9]*$/);
    assert.match(seen.i, /^[0-9a-f-]{36}$/);
    const state = await store.inspect(key, OPTS());
    assert.equal(state.lastToken.toString(), seen.t, 'the child saw the granted token');
    assert.equal(
      state.holder,
      undefined,
      'the 30 s lease was released when the command exited, not left to expire',
    );
  });

  it("exits with the command's own exit code", async () => {
    const p = run([
      'run',
      uniqueKey('run-code'),
      '--ttl',
      '5s',
      '--store',
      storeUrl,
      '--',
      NODE,
      '-e',
      'process.exit(3)',
    ]);
    assert.equal(await p.exited, 3);
  });

  it('exits 75 (busy) without running the command when the key is held and there is no wait', async () => {
    const key = uniqueKey('run-busy');
    const held = await client.acquire(key, { ttl: '30s' });
    assert.equal(held.status, 'acquired');
    const p = run([
      'run',
      key,
      '--ttl',
      '5s',
      '--store',
      storeUrl,
      '--',
      NODE,
      '-e',
      'console.log("ran")',
    ]);
    assert.equal(await p.exited, EXIT.busy, p.stderr());
    assert.equal(p.stdout(), '', 'the command must not run without the lease');
    assert.match(p.stderr(), /busy: held by test-client/);
    await (held as { lease: Lease }).lease.release();
  });

  it('exits 127 for a command that does not exist, and releases the lease', async () => {
    const key = uniqueKey('run-enoent');
    const p = run([
      'run',
      key,
      '--ttl',
      '30s',
      '--store',
      storeUrl,
      '--',
      'leasehold-no-such-command-xyz',
    ]);
    assert.equal(await p.exited, EXIT.notFound);
    assert.equal((await store.inspect(key, OPTS())).holder, undefined);
  });

  it('exits 69 (unavailable) when the server cannot be reached', async () => {
    const p = run([
      'run',
      uniqueKey('run-down'),
      '--ttl',
      '5s',
      '--server',
      'http://127.0.0.1:1',
      '--',
      NODE,
      '-e',
      '',
    ]);
    assert.equal(await p.exited, EXIT.unavailable, p.stderr());
  });
});

describe('leasehold run against a server', () => {
  let t: TestServer;
  let takeover: LeaseClient;
  const procs: CliProcess[] = [];
  const run = (args: string[]): CliProcess => {
    const p = spawnCli(args);
    procs.push(p);
    return p;
  };
  before(async () => {
    t = await startTestServer();
    takeover = new LeaseClient({ store: t.store, ownerId: 'test-client' });
  });
  after(async () => {
    for (const p of procs) killQuietly(p);
    await takeover?.close();
    await t?.close();
  });

  // Through a server: a SIGSTOP that lands while the run process commits to a shared SQLite
  // file would hold SQLite's write lock and block every other writer until SIGCONT.
  it('signals the command and exits 79 (lost) when the run process is paused past its TTL and another client takes over', async () => {
    const key = uniqueKey('run-lost');
    const p = run(['run', key, '--ttl', '1s', '--server', t.url, '--', NODE, '-e', LONG_CHILD]);
    const started = await p.waitFor(/started token=(\d+)/);
    const runToken = BigInt(started[1]!);
    assert.ok(p.child.kill('SIGSTOP'), 'SIGSTOP the run process (the command keeps running)');
    // The paused run cannot renew: once its TTL has run out by the store's clock, B gets in.
    const taken = await eventually('another client to take the key over', async () => {
      const r = await takeover.acquire(key, { ttl: '30s' });
      return r.status === 'acquired' ? r.lease : undefined;
    });
    assert.ok(taken.token > runToken);
    p.child.kill('SIGCONT');
    assert.equal(await p.exited, EXIT.lost, `stdout: ${p.stdout()} stderr: ${p.stderr()}`);
    assert.match(p.stdout(), /child got SIGTERM/, 'the command was told to stop');
    assert.match(p.stderr(), /lost/);
    const state = await t.store.inspect(key, OPTS());
    assert.equal(
      state.holder?.token,
      taken.token,
      'the run process did not disturb the new holder',
    );
    await taken.release();
  });

  it('kills a command that ignores SIGTERM after --kill-after, and still exits 79', async () => {
    const key = uniqueKey('run-kill');
    const stubborn = `process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('started token=' + process.env.LEASEHOLD_TOKEN); setInterval(() => {}, 1000);`;
    const p = run([
      'run',
      key,
      '--ttl',
      '1s',
      '--kill-after',
      '300ms',
      '--server',
      t.url,
      '--',
      NODE,
      '-e',
      stubborn,
    ]);
    await p.waitFor(/started token=\d+/);
    p.child.kill('SIGSTOP');
    const taken = await eventually('another client to take the key over', async () => {
      const r = await takeover.acquire(key, { ttl: '30s' });
      return r.status === 'acquired' ? r.lease : undefined;
    });
    p.child.kill('SIGCONT');
    assert.equal(await p.exited, EXIT.lost);
    assert.match(p.stdout(), /ignoring SIGTERM/);
    await taken.release();
  });
  it('waits for a busy key with --wait and runs the command once the holder releases', async () => {
    const key = uniqueKey('run-wait');
    const holder = new LeaseClient({ store: t.store, ownerId: 'holder' });
    const held = await holder.acquire(key, { ttl: '60s' });
    assert.equal(held.status, 'acquired');
    const lease = (held as { lease: Lease }).lease;
    const p = spawnCli([
      'run',
      key,
      '--ttl',
      '5s',
      '--wait',
      '30s',
      '--server',
      t.url,
      '--',
      NODE,
      '-e',
      'console.log("token=" + process.env.LEASEHOLD_TOKEN)',
    ]);
    procs.push(p);
    // Parked: its acquire waits in the server's queue for the key.
    const metric = async (re: RegExp): Promise<number> => {
      const text = await (await fetch(`${t.url}/metrics`)).text();
      return Number(re.exec(text)?.[1] ?? 0);
    };
    await eventually('run to park on the key', async () =>
      (await metric(/^leasehold_acquire_waiting(?:\{[^}]*\})? (\d+)/m)) >= 1 ? true : undefined,
    );
    assert.equal(p.stdout(), '', 'the command has not run while the key was held');
    await lease.release();
    assert.equal(await p.exited, 0, p.stderr());
    const token = BigInt(/token=(\d+)/.exec(p.stdout())?.[1] ?? '0');
    assert.ok(token > lease.token, `run got token ${token} after the holder's ${lease.token}`);
    await holder.close();
  });
});
