import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.js';
import { LeaseClient } from '../../src/core/client.js';
import {
  openStore,
  parseEtcdStoreUrl,
  parsePostgresStoreUrl,
} from '../../src/stores/open-store.js';
import { TEST_REDIS_URL } from '../contract/harnesses/redis.js';
import { spawnCli } from '../support/cli.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { uniqueKey } from '../support/keys.js';
import { PG_URL, dropSchema, uniqueSchema, withPgClient } from '../support/postgres.js';

async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = spawnCli(args);
  const code = await p.exited;
  return { code, out: p.stdout(), err: p.stderr() };
}

describe('store URLs for postgres://, etcd:// and redis://', () => {
  it('strips schema and table from a postgres URL and keeps the rest for pg', () => {
    const p = parsePostgresStoreUrl(
      'postgres://u:pw@db:5433/app?schema=s1&table=t1&sslmode=disable',
    );
    assert.equal(p.schema, 's1');
    assert.equal(p.table, 't1');
    assert.equal(p.connectionString, 'postgres://u:pw@db:5433/app?sslmode=disable');
  });

  it('parses several etcd endpoints and a namespace, and rejects a malformed endpoint', () => {
    assert.deepEqual(parseEtcdStoreUrl('etcd://a:2379,10.0.0.2:2380?namespace=app/'), {
      hosts: ['http://a:2379', 'http://10.0.0.2:2380'],
      namespace: 'app/',
    });
    assert.throws(() => parseEtcdStoreUrl('etcd://a,b:1'), /host:port/);
  });

  it('opens a working etcd store from an etcd:// URL, with its namespace', async () => {
    const cluster = await EtcdCluster.start({ size: 1, label: 'url' });
    try {
      const hosts = cluster.endpoints.map((e) => e.replace(/^http:\/\//, '')).join(',');
      const store = await openStore(`etcd://${hosts}?namespace=lh-url/`);
      try {
        assert.equal(store.kind, 'etcd');
        const key = uniqueKey('url');
        const r = await new LeaseClient({ store }).acquire(key, { ttl: '5s' });
        assert.equal(r.status, 'acquired');
        if (r.status === 'acquired') await r.lease.release();
      } finally {
        await store.close();
      }
    } finally {
      await cluster.stop();
    }
  });

  it('opens a working Redis store from a redis:// URL, with its prefix', async () => {
    const store = await openStore(`${TEST_REDIS_URL}?prefix=lh-url-${process.pid}:`);
    try {
      assert.equal(store.kind, 'redis');
      const r = await new LeaseClient({ store }).acquire(uniqueKey('url'), { ttl: '5s' });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') await r.lease.release();
    } finally {
      await store.close();
    }
  });

  it('opens a working PostgreSQL store from its URL', async () => {
    const schema = uniqueSchema('url');
    const store = await openStore(`${PG_URL}?schema=${schema}`);
    try {
      const r = await new LeaseClient({ store }).acquire(uniqueKey('url'), { ttl: '10s' });
      assert.equal(r.status, 'acquired');
      assert.equal(store.kind, 'postgres');
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });
});

describe('leasehold migrate and epoch (real processes, shared PostgreSQL)', () => {
  const schema = uniqueSchema('cliadm');
  const url = `${PG_URL}?schema=${schema}`;
  after(() => dropSchema(schema));

  it('migrate applies the migrations once, then reports nothing to do', async () => {
    const first = await cli('migrate', '--store', url, '--json');
    assert.equal(first.code, EXIT.ok, first.err);
    const applied = (JSON.parse(first.out) as { applied: string[] }).applied;
    assert.ok(applied.length >= 2, first.out);
    const second = await cli('migrate', '--store', url);
    assert.equal(second.code, EXIT.ok, second.err);
    assert.match(second.out, /up to date/);
    const tables = await withPgClient((c) =>
      c.query(
        `SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'coordination_lease'`,
        [schema],
      ),
    );
    assert.equal(tables.rowCount, 1);
  });

  it('epoch raises the floor above every earlier token and above --at-least, and clears holders', async () => {
    await cli('migrate', '--store', url);
    const store = await openStore(url);
    const client = new LeaseClient({ store });
    const key = uniqueKey('epoch');
    try {
      const before = await client.acquire(key, { ttl: '30s' });
      assert.equal(before.status, 'acquired');
      if (before.status !== 'acquired') return;
      const atLeast = (1n << 61n).toString();
      const ep = await cli('epoch', '--store', url, '--at-least', atLeast, '--json');
      assert.equal(ep.code, EXIT.ok, ep.err);
      const report = JSON.parse(ep.out) as { floor: string; rowsRaised: number };
      assert.equal(report.floor, atLeast);
      assert.ok(report.rowsRaised >= 1);
      // The pre-restore holder was cleared: the key is free, and the next token is above the floor.
      const after = await client.acquire(key, { ttl: '30s' });
      assert.equal(after.status, 'acquired');
      if (after.status === 'acquired') assert.ok(after.lease.token > BigInt(report.floor));
      const text = await cli('epoch', '--store', url);
      assert.equal(text.code, EXIT.ok, text.err);
      assert.match(text.out, /new fencing floor: \d+/);
      await before.lease.release().catch(() => undefined);
    } finally {
      await store.close();
    }
  });

  it('refuses a store without migrations or epochs with a usage error naming postgres', async () => {
    for (const [cmd, store] of [
      ['migrate', 'memory:'],
      ['epoch', 'memory:'],
    ] as const) {
      const r = await cli(cmd, '--store', store);
      assert.equal(r.code, EXIT.usage);
      assert.match(r.err, /postgres:\/\//);
    }
    // A SQLite file that does not exist is not created: there is nothing to raise.
    const missing = join(tmpdir(), `leasehold-no-such-${process.pid}.db`);
    const none = await cli('epoch', '--store', `sqlite:${missing}`);
    assert.equal(none.code, EXIT.unavailable, none.err);
    assert.match(none.err, /no lease table/);
    assert.equal(existsSync(missing), false);
    const bad = await cli('epoch', '--store', url, '--at-least', '-5');
    assert.equal(bad.code, EXIT.usage);
  });

  it('exits 69 when the database cannot be reached', async () => {
    const r = await cli('migrate', '--store', 'postgres://postgres@127.0.0.1:1/none');
    assert.equal(r.code, EXIT.unavailable, r.err);
  });

  it('explains when to run epoch in its --help', async () => {
    const r = await cli('epoch', '--help');
    assert.equal(r.code, EXIT.ok);
    assert.match(r.out, /restoring the store from a backup/);
    assert.match(r.out, /BEFORE letting clients in/);
  });
});
