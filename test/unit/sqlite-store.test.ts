import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { LeaseStore } from '../../src/core/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { tempDir } from '../support/tmp.js';

function withDb(fn: (path: string) => Promise<void>): Promise<void> {
  const tmp = tempDir('sqlite-unit');
  return fn(join(tmp.dir, 'leases.db')).finally(() => tmp.remove());
}

describe('SqliteLeaseStore', () => {
  it('refuses :memory: and in-memory URIs, saying why', () => {
    for (const path of [
      ':memory:',
      'file::memory:?cache=shared',
      'file:x?mode=memory&cache=shared',
    ]) {
      assert.throws(
        () => new SqliteLeaseStore({ path }),
        (e: unknown) =>
          isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') &&
          /private to one connection/.test(e.message),
      );
    }
  });

  it('refuses a table name that is not a plain identifier', () => {
    assert.throws(
      () => new SqliteLeaseStore({ path: '/tmp/x.db', table: 'a"; drop table b; --' }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
  });

  it('runs in WAL mode with synchronous=FULL, so a returned token is on disk', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path });
      assert.deepEqual(store.settings, { journalMode: 'wal', synchronous: 'FULL' });
      const raw = new Database(path, { readonly: true });
      assert.equal(
        raw.pragma('journal_mode', { simple: true }),
        'wal',
        'WAL is recorded in the file',
      );
      raw.close();
      await store.close();
    }));

  it('answers busy without writing anything: no commit, no WAL growth', () =>
    withDb(async (path) => {
      const a = new SqliteLeaseStore({ path });
      const b = new SqliteLeaseStore({ path });
      const holder = new LeaseClient({ store: a, ownerId: 'holder' });
      const contender = new LeaseClient({ store: b, ownerId: 'contender' });
      const held = await holder.acquire('hot', { ttl: 60_000, autoRenew: false });
      assert.equal(held.status, 'acquired');
      const observer = new Database(path, { readonly: true });
      const version = (): unknown => observer.pragma('data_version', { simple: true });
      const before = { version: version(), wal: statSync(`${path}-wal`).size };
      for (let i = 0; i < 200; i++)
        assert.equal((await contender.acquire('hot', { ttl: 1000 })).status, 'busy');
      assert.equal(version(), before.version, 'no other connection committed anything');
      assert.equal(statSync(`${path}-wal`).size, before.wal, 'the WAL did not grow');
      observer.close();
      if (held.status === 'acquired') await held.lease.release();
      await holder.close();
      await contender.close();
      await a.close();
      await b.close();
    }));

  it('treats a lease from an earlier boot as expired, and still increments its token', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path });
      const client = new LeaseClient({ store });
      const first = await client.acquire('boot', { ttl: 3_600_000, autoRenew: false });
      assert.equal(first.status, 'acquired');
      // The machine rebooted: the monotonic clock restarted, the boot id changed.
      const raw = new Database(path);
      raw
        .prepare(
          "UPDATE leasehold_lease SET boot_id = 'previous-boot', expires_us = 9223372036854775807 WHERE key = 'boot'",
        )
        .run();
      raw.close();
      const second = await client.acquire('boot', { ttl: 1000 });
      assert.equal(second.status, 'acquired', 'a lease from before the reboot does not block');
      if (first.status === 'acquired' && second.status === 'acquired') {
        assert.ok(second.lease.token > first.lease.token);
        await second.lease.release();
      }
      await client.close();
      await store.close();
    }));

  it('keeps tokens as 64-bit integers beyond 2^53 without precision loss', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path });
      const raw = new Database(path);
      raw
        .prepare("INSERT INTO leasehold_lease (key, token) VALUES ('big', 9007199254740993)")
        .run();
      raw.close();
      const client = new LeaseClient({ store });
      const r = await client.acquire('big', { ttl: 1000 });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') {
        assert.equal(r.lease.token, 9007199254740994n);
        await r.lease.release();
      }
      await client.close();
      await store.close();
    }));

  it('fails requests after close with ERR_CLOSED, which the client reports as unavailable', () =>
    withDb(async (path) => {
      const store: LeaseStore = new SqliteLeaseStore({ path });
      await store.close();
      await assert.rejects(
        store.inspect('k', { timeoutMs: 100, signal: new AbortController().signal }),
        (e: unknown) => isLeaseholdError(e, 'ERR_CLOSED'),
      );
    }));
});
