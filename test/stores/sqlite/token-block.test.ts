import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { StoreAcquireRequest, StoreRequestOptions } from '../../../src/core/store.js';
import { LIMITS } from '../../../src/core/validate.js';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { tempDir } from '../../support/tmp.js';

function withDb(fn: (path: string) => Promise<void>): Promise<void> {
  const tmp = tempDir('sqlite-block');
  return fn(join(tmp.dir, 'leases.db')).finally(() => tmp.remove());
}

const opts = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });
const request = (key: string, tokenBlock?: number): StoreAcquireRequest => ({
  key,
  leaseId: randomUUID(),
  ownerId: 'o',
  ttlMs: 60_000,
  value: undefined,
  ...(tokenBlock === undefined ? {} : { tokenBlock }),
});

/** The schema and migration record of the previous version (migration 0001 only), literally. */
const OLD_SCHEMA = `
CREATE TABLE leasehold_migrations (name TEXT NOT NULL PRIMARY KEY, applied_wall_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS "leasehold_lease" (
  key             TEXT    NOT NULL PRIMARY KEY,
  lease_id        TEXT,
  owner_id        TEXT,
  token           INTEGER NOT NULL DEFAULT 0 CHECK (token >= 0),
  expires_us      INTEGER NOT NULL DEFAULT 0,
  boot_id         TEXT    NOT NULL DEFAULT '',
  expires_wall_ms INTEGER NOT NULL DEFAULT 0,
  value           TEXT
) WITHOUT ROWID;
INSERT INTO leasehold_migrations VALUES ('leasehold_lease/0001_lease.sql', 0);`;

/** The previous version's grant statement, literally: a process not yet upgraded runs it. */
const OLD_ACQUIRE = `
INSERT INTO "leasehold_lease" (key, lease_id, owner_id, token, expires_us, boot_id, expires_wall_ms, value)
VALUES (@key, @leaseId, @ownerId, 1, @expiresUs, @bootId, @expiresWallMs, @value)
ON CONFLICT (key) DO UPDATE SET
  lease_id = excluded.lease_id,
  owner_id = excluded.owner_id,
  token = "leasehold_lease".token + 1,
  expires_us = excluded.expires_us,
  boot_id = excluded.boot_id,
  expires_wall_ms = excluded.expires_wall_ms,
  value = excluded.value
WHERE "leasehold_lease".lease_id IS NULL
   OR "leasehold_lease".boot_id <> @bootId
   OR "leasehold_lease".expires_us <= @nowUs
RETURNING token`;

const oldGrant = (raw: Database.Database, key: string): unknown =>
  raw.prepare(OLD_ACQUIRE).get({
    key,
    leaseId: randomUUID(),
    ownerId: 'old',
    expiresUs: 1,
    bootId: 'old-boot',
    expiresWallMs: 0,
    value: null,
    nowUs: 0,
  });

type Row = { token: bigint; token_block: bigint | null; lease_id: string | null };
const rowOf = (path: string, key: string): Row | undefined => {
  const raw = new Database(path, { readonly: true });
  raw.defaultSafeIntegers(true);
  try {
    return raw
      .prepare('SELECT token, token_block, lease_id FROM leasehold_lease WHERE key = ?')
      .get(key) as Row | undefined;
  } finally {
    raw.close();
  }
};

const tokenOf = (r: { status: string; token?: bigint }): bigint => {
  assert.equal(r.status, 'acquired');
  return r.token!;
};

describe('SqliteLeaseStore token blocks', () => {
  it('opens a file made by the previous version, migrates it without rewriting rows, and keeps tokens increasing past a block', () =>
    withDb(async (path) => {
      const raw = new Database(path);
      raw.pragma('journal_mode = WAL');
      raw.exec(OLD_SCHEMA);
      raw.exec(
        "INSERT INTO leasehold_lease (key, token) VALUES ('old', 41), ('free', 9007199254740993)",
      );
      raw.close();
      const store = new SqliteLeaseStore({ path });
      const migrated = new Database(path, { readonly: true });
      assert.deepEqual(
        migrated
          .prepare('SELECT name FROM leasehold_migrations ORDER BY name')
          .all()
          .map((r) => (r as { name: string }).name),
        [
          'leasehold_lease/0001_lease.sql',
          'leasehold_lease/0002_token_block.sql',
          'leasehold_lease/0003_epoch.sql',
          'leasehold_lease/0004_lock_delay.sql',
        ],
      );
      migrated.close();
      assert.deepEqual(rowOf(path, 'old'), { token: 41n, token_block: null, lease_id: null });
      assert.equal((await store.inspect('old', opts())).lastToken, 41n, 'NULL block = the token');

      const first = request('old', 8);
      const t1 = tokenOf(await store.tryAcquire(first, opts()));
      assert.equal(t1, 42n);
      assert.equal((await store.inspect('old', opts())).lastToken, 49n);
      assert.deepEqual(rowOf(path, 'old'), {
        token: 42n,
        token_block: 8n,
        lease_id: first.leaseId,
      });
      await store.release({ key: 'old', leaseId: first.leaseId, token: t1 }, opts());
      const t2 = tokenOf(await store.tryAcquire(request('old'), opts()));
      assert.equal(t2, 50n, 'the next grant comes after the whole block');
      assert.equal(rowOf(path, 'old')?.token_block, null, 'a block of 1 is stored as NULL');
      assert.equal(
        tokenOf(await store.tryAcquire(request('free', 2), opts())),
        9007199254740994n,
        'an old row beyond 2^53 keeps its precision',
      );
      await store.close();
      // Opening again applies nothing more.
      const again = new SqliteLeaseStore({ path });
      assert.equal((await again.inspect('old', opts())).holder?.token, 50n);
      await again.close();
    }));

  it("refuses a not-yet-upgraded process's grant inside a reserved block, changing nothing", () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path });
      const held = request('k', 4);
      const t = tokenOf(await store.tryAcquire(held, opts()));
      await store.release({ key: 'k', leaseId: held.leaseId, token: t }, opts());
      const before = rowOf(path, 'k');
      const raw = new Database(path);
      raw.defaultSafeIntegers(true);
      assert.throws(() => oldGrant(raw, 'k'), /reserved by a token block/);
      assert.deepEqual(rowOf(path, 'k'), before);
      // A key whose last grant reserved no block is granted by the old statement as before.
      const plain = request('plain');
      const tp = tokenOf(await store.tryAcquire(plain, opts()));
      await store.release({ key: 'plain', leaseId: plain.leaseId, token: tp }, opts());
      assert.deepEqual(oldGrant(raw, 'plain'), { token: tp + 1n });
      raw.close();
      // Once this version grants the key again, above the block, the old statement works again.
      const next = request('k');
      const t2 = tokenOf(await store.tryAcquire(next, opts()));
      assert.equal(t2, t + 4n);
      await store.release({ key: 'k', leaseId: next.leaseId, token: t2 }, opts());
      const raw2 = new Database(path);
      raw2.defaultSafeIntegers(true);
      assert.deepEqual(oldGrant(raw2, 'k'), { token: t2 + 1n });
      raw2.close();
      await store.close();
    }));

  for (const groupCommit of [false, true]) {
    it(`refuses a block that would end above int64's maximum without changing the row${groupCommit ? ' (group commit)' : ''}`, () =>
      withDb(async (path) => {
        const store = new SqliteLeaseStore({ path, groupCommit });
        const max = LIMITS.maxToken;
        const raw = new Database(path);
        raw.defaultSafeIntegers(true);
        raw
          .prepare('INSERT INTO leasehold_lease (key, token, token_block) VALUES (?, ?, ?)')
          .run('edge', max - 10n, 2n); // top = max − 9: room for 9 more tokens
        raw.close();
        const before = rowOf(path, 'edge');
        const wal = statSync(`${path}-wal`).size;
        await assert.rejects(
          store.tryAcquire(request('edge', 10), opts()),
          (e: unknown) => isLeaseholdError(e, 'ERR_UNAVAILABLE') && /exhausted/.test(e.message),
        );
        assert.deepEqual(rowOf(path, 'edge'), before, 'nothing written');
        assert.equal(statSync(`${path}-wal`).size, wal, 'no WAL frame');
        // A block of exactly the room left is granted, with its top at the maximum.
        const last = request('edge', 9);
        assert.equal(tokenOf(await store.tryAcquire(last, opts())), max - 8n);
        assert.equal((await store.inspect('edge', opts())).lastToken, max);
        await store.release({ key: 'edge', leaseId: last.leaseId, token: max - 8n }, opts());
        // Even a block of one is refused now (the previous version stored a REAL here).
        await assert.rejects(store.tryAcquire(request('edge'), opts()), /exhausted/);
        assert.equal(rowOf(path, 'edge')?.token, max - 8n);
        await store.close();
      }));
  }

  it('refuses an exhausted grant in a hand-off and keeps the released lease (one transaction)', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path });
      const raw = new Database(path);
      raw.defaultSafeIntegers(true);
      raw
        .prepare('INSERT INTO leasehold_lease (key, token) VALUES (?, ?)')
        .run('edge', LIMITS.maxToken - 5n);
      raw.close();
      const held = request('edge');
      const t = tokenOf(await store.tryAcquire(held, opts()));
      const ref = { key: 'edge', leaseId: held.leaseId, token: t };
      const before = rowOf(path, 'edge');
      await assert.rejects(
        store.releaseAndAcquire(ref, request('edge', 8), opts()),
        (e: unknown) => isLeaseholdError(e, 'ERR_UNAVAILABLE') && /exhausted/.test(e.message),
      );
      assert.deepEqual(rowOf(path, 'edge'), before, 'the release was rolled back with it');
      assert.equal((await store.release(ref, opts())).status, 'released');
      await store.close();
    }));

  it('refuses a token block outside 1..64 with ERR_INVALID_ARGUMENT', () =>
    withDb(async (path) => {
      const store = new SqliteLeaseStore({ path, groupCommit: true });
      for (const tokenBlock of [0, 65, 1.5]) {
        await assert.rejects(
          store.tryAcquire(request('k', tokenBlock), opts()),
          (e: unknown) =>
            isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /tokenBlock/.test(e.message),
        );
      }
      assert.equal(rowOf(path, 'k'), undefined);
      await store.close();
    }));
});
