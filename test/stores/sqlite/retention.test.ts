import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { pruneSqlite, pruneSqliteKeys } from '../../../src/stores/sqlite/retention.js';
import { tempDir } from '../../support/tmp.js';
import {
  runRetentionScenario,
  RETENTION_KEYS,
  type RetentionSubject,
} from '../../support/retention-scenario.js';

function subject(path: string, store: SqliteLeaseStore, raiseFloor: boolean): RetentionSubject {
  return {
    store,
    seedReleased: (keys, tokenOf) => {
      const raw = new Database(path);
      raw.defaultSafeIntegers(true);
      const ins = raw.prepare('INSERT INTO leasehold_lease (key, token) VALUES (?, ?)');
      raw.transaction(() => keys.forEach((k, i) => ins.run(k, tokenOf(i))))();
      raw.close();
      return Promise.resolve();
    },
    prune: () =>
      raiseFloor
        ? pruneSqliteKeys({ path, olderThanMs: 0 })
        : Promise.resolve(pruneSqlite({ path }, false)),
    records: () => {
      const raw = new Database(path, { readonly: true });
      const { n } = raw.prepare('SELECT count(*) AS n FROM leasehold_lease').get() as { n: number };
      raw.close();
      return Promise.resolve(n);
    },
  };
}

async function scenario(raiseFloor: boolean) {
  const tmp = tempDir('sqlite-retention');
  const path = join(tmp.dir, 'leases.db');
  const store = new SqliteLeaseStore({ path });
  try {
    return await runRetentionScenario(subject(path, store, raiseFloor), 'ret/');
  } finally {
    await store.close();
    tmp.remove();
  }
}

describe(`SQLite retention (${RETENTION_KEYS} released keys)`, () => {
  it('deletes released keys, keeps held ones, and every later first grant is above every earlier token', async () => {
    const out = await scenario(true);
    assert.deepEqual(out.violations, []);
    assert.equal(out.deleted, RETENTION_KEYS + 50);
    assert.ok(out.recordsAfter <= Math.ceil(out.liveRows * 1.1), `${out.recordsAfter} rows left`);
  });

  it('a prune that forgets to raise the floor is caught (planted bug)', async () => {
    const out = await scenario(false);
    assert.ok(out.violations.length > 0, 'the scenario must notice reused tokens');
  });

  it('keeps keys expired less than the grace period, and deletes nothing held', async () => {
    const tmp = tempDir('sqlite-retention-grace');
    const path = join(tmp.dir, 'leases.db');
    const store = new SqliteLeaseStore({ path });
    try {
      const o = { timeoutMs: 5000, signal: new AbortController().signal };
      const r = await store.tryAcquire(
        { key: 'short', leaseId: crypto.randomUUID(), ownerId: 'o', ttlMs: 1, value: undefined },
        o,
      );
      assert.equal(r.status, 'acquired');
      await store.tryAcquire(
        {
          key: 'held',
          leaseId: crypto.randomUUID(),
          ownerId: 'o',
          ttlMs: 60_000,
          value: undefined,
        },
        o,
      );
      await new Promise((res) => setTimeout(res, 20));
      const kept = await pruneSqliteKeys({ path, olderThanMs: 3_600_000 });
      assert.equal(kept.deleted, 0, 'expired for less than an hour: kept');
      const gone = await pruneSqliteKeys({ path, olderThanMs: 0, batch: 1 });
      assert.equal(gone.deleted, 1, 'only the expired key');
      assert.equal(gone.floor, r.status === 'acquired' ? r.token : -1n);
      assert.equal((await store.inspect('held', o)).holder !== undefined, true);
    } finally {
      await store.close();
      tmp.remove();
    }
  });
});
