import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs, { fstatSync, statSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreRequestOptions,
} from '../../../src/core/store.js';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { tempDir } from '../../support/tmp.js';

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

  it('is back at synchronous=FULL after every renewal and release (they alone commit without fsync)', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path });
      const o = { timeoutMs: 1000, signal: new AbortController().signal };
      for (let i = 0; i < 3; i++) {
        const leaseId = randomUUID();
        const a = await store.tryAcquire(
          { key: 'sync', leaseId, ownerId: 'o', ttlMs: 5000, value: undefined },
          o,
        );
        assert.equal(a.status, 'acquired');
        const token = a.status === 'acquired' ? a.token : 0n;
        assert.equal(
          (await store.renew({ key: 'sync', leaseId, token, ttlMs: 5000 }, o)).status,
          'renewed',
        );
        assert.equal(store.settings.synchronous, 'FULL', 'the next grant must be fsynced');
        assert.equal((await store.release({ key: 'sync', leaseId, token }, o)).status, 'released');
        assert.equal(store.settings.synchronous, 'FULL', 'the next grant must be fsynced');
      }
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

describe('SqliteLeaseStore with groupCommit', () => {
  const opts = (): StoreRequestOptions => ({
    timeoutMs: 5000,
    signal: new AbortController().signal,
  });
  const request = (key: string, leaseId = randomUUID()): StoreAcquireRequest => ({
    key,
    leaseId,
    ownerId: 'o',
    ttlMs: 60_000,
    value: undefined,
  });
  const walSize = (path: string): number => statSync(`${path}-wal`).size;

  for (const groupCommit of [true, false]) {
    it(`tells this process's watchers a grant as 'granted' and a release without a value, a hand-off that grants as 'granted' (groupCommit ${groupCommit})`, () =>
      withDb(async (path) => {
        const store = new SqliteLeaseStore({ path, groupCommit });
        const watcher = new SqliteLeaseStore({ path });
        const told: Array<string | undefined> = [];
        const unwatch = await watcher.watch('k', (change) => told.push(change));
        // Same-process notifications are microtasks queued at the commit: a turn is enough.
        // The sidecar's file events (for other processes) may add calls without a value at
        // any time, so the checks count the 'granted' ones.
        const settle = (): Promise<void> => new Promise((r) => setImmediate(r));
        const grants = (): number => told.filter((c) => c === 'granted').length;
        try {
          const a = request('k');
          const granted = await store.tryAcquire(a, opts());
          assert.equal(granted.status, 'acquired');
          if (granted.status !== 'acquired') return;
          await settle();
          assert.equal(grants(), 1, told.join());
          assert.ok(told.every((c) => c === undefined || c === 'granted'));
          const b = request('k');
          const handed = await store.releaseAndAcquire(
            { key: 'k', leaseId: a.leaseId, token: granted.token },
            b,
            opts(),
          );
          assert.equal(handed.acquired.status, 'acquired');
          if (handed.acquired.status !== 'acquired') return;
          await settle();
          // Held again: a waiter of this process need not look.
          assert.equal(grants(), 2, told.join());
          const beforeRelease = told.length;
          assert.equal(
            (
              await store.release(
                { key: 'k', leaseId: b.leaseId, token: handed.acquired.token },
                opts(),
              )
            ).status,
            'released',
          );
          await settle();
          assert.equal(grants(), 2, 'a release is never told as a grant');
          assert.ok(told.slice(beforeRelease).includes(undefined));
        } finally {
          unwatch();
          await store.close();
          await watcher.close();
        }
      }));
  }

  it('writes the grants asked for in one loop turn in one transaction: a fraction of the WAL frames', () =>
    withDb(async (path) => {
      const grouped = new SqliteLeaseStore({ path, groupCommit: true });
      const single = new SqliteLeaseStore({ path: `${path}-single.db` });
      assert.equal(grouped.groupCommit, true);
      assert.equal(single.groupCommit, false);
      const grow = async (store: SqliteLeaseStore, file: string): Promise<number> => {
        await store.tryAcquire(request('warm-up'), opts()); // the table's first pages
        const before = walSize(file);
        const answers = await Promise.all(
          Array.from({ length: 32 }, (_, i) => store.tryAcquire(request(`k${i}`), opts())),
        );
        assert.deepEqual(new Set(answers.map((a) => a.status)), new Set(['acquired']));
        return walSize(file) - before;
      };
      const groupedBytes = await grow(grouped, path);
      const singleBytes = await grow(single, `${path}-single.db`);
      // One commit appends the changed pages once; 32 commits append them 32 times.
      assert.ok(
        groupedBytes * 8 <= singleBytes,
        `grouped ${groupedBytes} B of WAL vs ${singleBytes} B one grant per commit`,
      );
      await grouped.close();
      await single.close();
    }));

  it('gives one key to one of several grants in the same batch; the others are busy, tokens rise by one', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path, groupCommit: true });
      const before = (await store.inspect('hot', opts())).lastToken;
      const answers = await Promise.all(
        Array.from({ length: 8 }, () => store.tryAcquire(request('hot'), opts())),
      );
      const won = answers.filter((a) => a.status === 'acquired');
      assert.equal(won.length, 1);
      const token = won[0]?.status === 'acquired' ? won[0].token : -1n;
      assert.equal(token, before + 1n);
      for (const a of answers) {
        if (a.status === 'busy') assert.equal(a.holder.token, token, 'busy names the winner');
      }
      await store.close();
    }));

  it('answers a retried request (same lease id) in the same batch with the same token', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path, groupCommit: true });
      const id = randomUUID();
      const [a, b] = await Promise.all([
        store.tryAcquire(request('retry', id), opts()),
        store.tryAcquire(request('retry', id), opts()),
      ]);
      assert.equal(a?.status, 'acquired');
      assert.deepEqual(
        b?.status === 'acquired' ? b.token : undefined,
        a?.status === 'acquired' ? a.token : 'none',
      );
      await store.close();
    }));

  it('answers busy at once without writing anything', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path, groupCommit: true });
      assert.equal((await store.tryAcquire(request('held'), opts())).status, 'acquired');
      const observer = new Database(path, { readonly: true });
      const version = (): unknown => observer.pragma('data_version', { simple: true });
      const before = { version: version(), wal: walSize(path) };
      const contender = new SqliteLeaseStore({ path, groupCommit: true });
      for (let i = 0; i < 50; i++)
        assert.equal((await contender.tryAcquire(request('held'), opts())).status, 'busy');
      assert.equal(version(), before.version);
      assert.equal(walSize(path), before.wal);
      observer.close();
      await contender.close();
      await store.close();
    }));

  it('fails every grant of a batch whose commit failed, and none of them was granted', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path, groupCommit: true, busyTimeoutMs: 0 });
      const blocker = new Database(path);
      blocker.exec('BEGIN IMMEDIATE'); // another process holds the write lock
      const answers = await Promise.allSettled(
        ['f1', 'f2', 'f3'].map((k) => store.tryAcquire(request(k), opts())),
      );
      blocker.exec('ROLLBACK');
      blocker.close();
      for (const a of answers) {
        assert.equal(a.status, 'rejected');
        assert.ok(isLeaseholdError(a.reason, 'ERR_UNAVAILABLE'), String(a.reason));
      }
      for (const k of ['f1', 'f2', 'f3'])
        assert.equal((await store.inspect(k, opts())).lastToken, 0n, `${k} was not granted`);
      assert.equal((await store.tryAcquire(request('f1'), opts())).status, 'acquired');
      await store.close();
    }));

  it('commits and answers grants still queued when it is closed', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path, groupCommit: true });
      const pending = store.tryAcquire(request('late'), opts());
      // Microtasks only: the read happens and the grant is queued, but the loop turn that
      // would commit it does not come before close().
      for (let i = 0; i < 10; i++) await Promise.resolve();
      await store.close();
      const answer = await pending;
      assert.equal(answer.status, 'acquired');
      const other = new SqliteLeaseStore({ path });
      assert.equal((await other.inspect('late', opts())).holder?.ownerId, 'o', 'it is on disk');
      await other.close();
    }));

  /**
   * Opens a group-committing store whose fdatasync calls are held until the test finishes
   * them (node:fs is patched only while the store is made: it takes the function at open).
   */
  const withHeldSync = (
    path: string,
  ): { store: SqliteLeaseStore; calls: Array<{ fd: number; done: (e: Error | null) => void }> } => {
    const calls: Array<{ fd: number; done: (e: Error | null) => void }> = [];
    const original = fs.fdatasync;
    fs.fdatasync = ((fd: number, done: (e: Error | null) => void): void => {
      calls.push({ fd, done });
    }) as unknown as typeof fs.fdatasync;
    syncBuiltinESMExports();
    try {
      return { store: new SqliteLeaseStore({ path, groupCommit: true }), calls };
    } finally {
      fs.fdatasync = original;
      syncBuiltinESMExports();
    }
  };
  const settled = async (p: Promise<unknown>): Promise<boolean> => {
    let done = false;
    p.then(
      () => (done = true),
      () => (done = true),
    );
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    return done;
  };
  /** Loop turns until `cond` holds (bounded). */
  const turnsUntil = async (cond: () => boolean): Promise<void> => {
    for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setImmediate(r));
    assert.ok(cond(), 'condition not reached within 200 loop turns');
  };

  it('commits with synchronous = NORMAL (SQLite does not fsync on the event loop); the default store stays FULL', () =>
    withDb(async (path) => {
      const grouped = new SqliteLeaseStore({ path, groupCommit: true });
      const single = new SqliteLeaseStore({ path: `${path}-single.db` });
      assert.equal(grouped.settings.synchronous, 'NORMAL');
      assert.equal(single.settings.synchronous, 'FULL');
      const r = request('k');
      const a = await grouped.tryAcquire(r, opts());
      const token = a.status === 'acquired' ? a.token : 0n;
      await grouped.renew({ key: 'k', leaseId: r.leaseId, token, ttlMs: 1000 }, opts());
      await grouped.release({ key: 'k', leaseId: r.leaseId, token }, opts());
      assert.equal(grouped.settings.synchronous, 'NORMAL', 'still NORMAL after writes');
      await grouped.close();
      await single.close();
    }));

  it('answers a grant only once an fdatasync of the WAL, started after its commit, has finished', () =>
    withDb(async (path) => {
      const { store, calls } = withHeldSync(path);
      const id = randomUUID();
      const grant = store.tryAcquire(request('durable', id), opts());
      await turnsUntil(() => calls.length === 1);
      assert.equal(fstatSync(calls[0]!.fd).ino, statSync(`${path}-wal`).ino, 'it syncs the WAL');
      const observer = new SqliteLeaseStore({ path });
      const seen = await observer.inspect('durable', opts());
      assert.equal(seen.holder?.ownerId, 'o', 'committed before the sync');
      assert.equal(await settled(grant), false, 'not answered before the sync finishes');
      // A retry with the same lease id reads the committed grant: it waits for a sync too.
      const retry = store.tryAcquire(request('durable', id), opts());
      assert.equal(await settled(retry), false);
      calls[0]!.done(null);
      const answer = await grant;
      assert.equal(answer.status === 'acquired' ? answer.token : undefined, seen.lastToken);
      await turnsUntil(() => calls.length === 2);
      assert.equal(await settled(retry), false, 'the retry read came after the first sync began');
      calls[1]!.done(null);
      assert.deepEqual(await retry, { status: 'acquired', token: seen.lastToken });
      await observer.close();
      await store.close();
    }));

  it('answers unavailable when the WAL cannot be synced, and refuses grants after that', () =>
    withDb(async (path) => {
      const { store, calls } = withHeldSync(path);
      const grant = store.tryAcquire(request('eio'), opts());
      await turnsUntil(() => calls.length === 1);
      calls[0]!.done(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
      await assert.rejects(grant, (e: unknown) => isLeaseholdError(e, 'ERR_UNAVAILABLE'));
      await assert.rejects(store.tryAcquire(request('next'), opts()), (e: unknown) =>
        isLeaseholdError(e, 'ERR_UNAVAILABLE'),
      );
      assert.equal(calls.length, 1, 'no sync is trusted after a failed one');
      await store.close();
    }));

  it('close() waits for the running sync and answers its grants; later calls fail closed', () =>
    withDb(async (path) => {
      const { store, calls } = withHeldSync(path);
      const grant = store.tryAcquire(request('closing'), opts());
      await turnsUntil(() => calls.length === 1);
      const closed = store.close();
      assert.equal(await settled(closed), false, 'close waits for the sync');
      calls[0]!.done(null);
      await closed;
      assert.equal((await grant).status, 'acquired');
      await assert.rejects(store.tryAcquire(request('after'), opts()), (e: unknown) =>
        isLeaseholdError(e, 'ERR_CLOSED'),
      );
    }));

  it('writes the releases of one loop turn in one transaction too', () =>
    withDb(async (path) => {
      const grow = async (store: SqliteLeaseStore, file: string): Promise<number> => {
        const granted = await Promise.all(
          Array.from({ length: 32 }, async (_, i) => {
            const r = request(`r${i}`);
            const a = await store.tryAcquire(r, opts());
            assert.equal(a.status, 'acquired');
            return {
              key: r.key,
              leaseId: r.leaseId,
              token: a.status === 'acquired' ? a.token : 0n,
            };
          }),
        );
        const before = walSize(file);
        const answers = await Promise.all(granted.map((l) => store.release(l, opts())));
        assert.deepEqual(new Set(answers.map((a) => a.status)), new Set(['released']));
        return walSize(file) - before;
      };
      const grouped = new SqliteLeaseStore({ path, groupCommit: true });
      const single = new SqliteLeaseStore({ path: `${path}-single.db` });
      const groupedBytes = await grow(grouped, path);
      const singleBytes = await grow(single, `${path}-single.db`);
      assert.ok(
        groupedBytes * 8 <= singleBytes,
        `grouped ${groupedBytes} B of WAL vs ${singleBytes} B one release per commit`,
      );
      await grouped.close();
      await single.close();
    }));

  it('refuses a groupCommit that is not a boolean', () => {
    assert.throws(
      () => new SqliteLeaseStore({ path: '/tmp/x.db', groupCommit: 'yes' as never }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /groupCommit/.test(e.message),
    );
  });
});
