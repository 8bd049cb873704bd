import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { openStore } from '../../src/stores/open-store.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { spawnCli } from '../support/cli.js';
import { uniqueKey } from '../support/keys.js';
import { tempDir } from '../support/tmp.js';

describe('leasehold acquire, renew, release, status, ls (real processes)', () => {
  const tmp = tempDir('cli-cmds');
  const store = `sqlite:${join(tmp.dir, 'leases.db')}`;
  after(() => tmp.remove());

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    const p = spawnCli(args, { cwd: tmp.dir });
    const code = await p.exited;
    return { code, out: p.stdout(), err: p.stderr() };
  }

  it('acquires, shows, lists, renews and releases a lease, with --json output and documented exit codes', async () => {
    const key = uniqueKey('cmds');
    const acq = await cli(
      'acquire',
      key,
      '--ttl',
      '30s',
      '--value',
      'host:1',
      '--owner',
      'me',
      '--store',
      store,
      '--json',
    );
    assert.equal(acq.code, 0, acq.err);
    const lease = JSON.parse(acq.out) as {
      status: string;
      leaseId: string;
      token: string;
      key: string;
    };
    assert.equal(lease.status, 'acquired');
    assert.match(lease.token, /^[1-9]\d*$/);

    const busy = await cli('acquire', key, '--ttl', '5s', '--store', store, '--json');
    assert.equal(busy.code, EXIT.busy);
    assert.equal((JSON.parse(busy.out) as { holder: { ownerId: string } }).holder.ownerId, 'me');

    const status = await cli('status', key, '--store', store, '--json');
    assert.equal(status.code, 0);
    const state = JSON.parse(status.out) as {
      lastToken: string;
      holder: { token: string; value: string; leaseIdPrefix: string };
    };
    assert.equal(state.holder.token, lease.token);
    assert.equal(state.holder.value, 'host:1');
    assert.ok(!status.out.includes(lease.leaseId), 'status never shows the full lease id');

    const ls = await cli('ls', key.slice(0, key.lastIndexOf('/') + 1), '--store', store, '--json');
    assert.equal(ls.code, 0);
    assert.ok(
      (JSON.parse(ls.out) as { leases: Array<{ key: string }> }).leases.some((l) => l.key === key),
    );
    const table = await cli('ls', key, '--store', store);
    assert.match(table.out, /^KEY\s+TOKEN\s+OWNER\s+LEFT/);

    const ref = ['--lease-id', lease.leaseId, '--token', lease.token, '--store', store];
    assert.equal((await cli('renew', key, ...ref, '--ttl', '30s')).code, 0);
    const wrong = await cli(
      'release',
      key,
      '--lease-id',
      '00000000-0000-4000-8000-000000000000',
      '--token',
      lease.token,
      '--store',
      store,
    );
    assert.equal(wrong.code, EXIT.lost, 'a wrong lease id is not the owner');
    assert.equal((await cli('release', key, ...ref)).code, 0);
    assert.equal(
      (await cli('release', key, ...ref)).code,
      EXIT.lost,
      'a second release is not the owner any more',
    );
    assert.equal(
      (await cli('renew', key, ...ref, '--ttl', '30s')).code,
      EXIT.lost,
      'a released lease is lost for good',
    );
    const free = await cli('status', key, '--store', store);
    assert.match(free.out, /free/);
  });

  it('exits 64 naming the field for bad arguments, and 0 for --help', async () => {
    const badToken = await cli(
      'release',
      'k',
      '--lease-id',
      '00000000-0000-4000-8000-000000000000',
      '--token',
      '0x10',
      '--store',
      store,
    );
    assert.equal(badToken.code, EXIT.usage);
    assert.match(badToken.err, /token must be a decimal string/);
    const badTtl = await cli('acquire', 'k', '--ttl', '5', '--store', store);
    assert.equal(badTtl.code, EXIT.usage);
    assert.match(badTtl.err, /ttl must be between/);
    assert.equal((await cli('acquire', 'k', '--store', store)).code, EXIT.usage, 'missing --ttl');
    assert.equal((await cli('frobnicate')).code, EXIT.usage);
    const help = await cli('run', '--help');
    assert.equal(help.code, 0);
    assert.match(help.out, /LEASEHOLD_TOKEN/);
  });
});

describe('store URLs', () => {
  it('opens sqlite: and memory: stores and refuses unknown schemes naming the field', async () => {
    const tmp = tempDir('open-store');
    try {
      const s = await openStore(`sqlite:${join(tmp.dir, 'x.db')}`);
      assert.equal(s.kind, 'sqlite');
      await s.close();
      const m = await openStore('memory:');
      assert.equal(m.kind, 'memory');
      await m.close();
      await assert.rejects(
        openStore('mysql://x'),
        (err: unknown) =>
          isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && err.message.startsWith('store'),
      );
      await assert.rejects(openStore('http://127.0.0.1:1'), (err: unknown) =>
        isLeaseholdError(err, 'ERR_UNAVAILABLE'),
      );
    } finally {
      tmp.remove();
    }
  });
});
