import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { FenceResult } from '../../../src/core/results.js';
import { claimInSqlite, fenceInSqlite } from '../../../src/fencing/in-transaction/index.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { tempDir } from '../../support/tmp.js';

class RollBack extends Error {
  constructor(readonly result: FenceResult<undefined>) {
    super(result.status);
  }
}

/**
 * The SQLite fence inside the user's own better-sqlite3 transaction (issue 43): the report
 * write and fenceInSqlite in one `db.transaction(fn).immediate()`, rolled back unless applied.
 */
describe('fenceInSqlite inside your own better-sqlite3 transaction', () => {
  const tmp = tempDir('fencetx-sqlite');
  let db: Database.Database;

  before(() => {
    db = new Database(join(tmp.dir, 'app.db'));
    db.pragma('journal_mode = WAL');
    db.exec(
      'CREATE TABLE report (id TEXT PRIMARY KEY, body TEXT NOT NULL, token INTEGER NOT NULL)',
    );
  });
  after(() => {
    db.close();
    tmp.remove();
  });

  /** The user's code: the domain write and its fence in one transaction. */
  function writeReport(
    scope: string,
    token: bigint,
    body: string,
    o: { rollBack?: boolean; idempotencyKey?: string } = {},
  ): FenceResult<undefined> {
    const write = db.transaction(() => {
      db.prepare(
        `INSERT INTO report (id, body, token) VALUES (?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET body = excluded.body, token = excluded.token`,
      ).run(scope, body, token);
      const r = fenceInSqlite(db, { scope, token, idempotencyKey: o.idempotencyKey });
      if (r.status !== 'applied' || o.rollBack === true) throw new RollBack(r);
      return r;
    });
    try {
      return write.immediate();
    } catch (err) {
      if (err instanceof RollBack) return err.result;
      throw err;
    }
  }
  const row = (id: string): unknown =>
    db.prepare('SELECT body, token FROM report WHERE id = ?').get(id);
  const mark = (scope: string): bigint => new SqliteFence({ database: db }).highWaterMark(scope);

  it("applies a fresh token's write and refuses 41 after 42, the row unchanged", () => {
    assert.deepEqual(writeReport('report/a', 42n, 'by 42'), {
      status: 'applied',
      value: undefined,
    });
    assert.deepEqual(writeReport('report/a', 41n, 'by 41'), {
      status: 'stale_fence',
      highWaterMark: 42n,
    });
    assert.deepEqual(row('report/a'), { body: 'by 42', token: 42 });
    assert.equal(mark('report/a'), 42n);
  });

  it('leaves the mark where it was when the transaction rolls back after applied', () => {
    assert.equal(writeReport('report/b', 5n, 'by 5').status, 'applied');
    assert.equal(writeReport('report/b', 9n, 'by 9', { rollBack: true }).status, 'applied');
    assert.equal(mark('report/b'), 5n);
    assert.deepEqual(row('report/b'), { body: 'by 5', token: 5 });
    assert.equal(writeReport('report/b', 7n, 'by 7').status, 'applied');
  });

  it('answers duplicate for a repeated idempotency key, and shares marks with SqliteFence', () => {
    assert.equal(writeReport('report/c', 3n, 'first', { idempotencyKey: 'k' }).status, 'applied');
    assert.deepEqual(writeReport('report/c', 3n, 'again', { idempotencyKey: 'k' }), {
      status: 'duplicate',
    });
    assert.deepEqual(row('report/c'), { body: 'first', token: 3 });
    const fence = new SqliteFence({ database: db });
    assert.deepEqual(
      fence.apply('report/c', 2n, () => assert.fail('a stale write ran')),
      { status: 'stale_fence', highWaterMark: 3n },
    );
    // A claim in the user's transaction refuses older writes through SqliteFence too.
    assert.deepEqual(db.transaction(() => claimInSqlite(db, 'report/c', 10n)).immediate(), {
      status: 'applied',
    });
    assert.equal(fence.apply('report/c', 9n, () => 'x').status, 'stale_fence');
  });

  it('refuses to run outside a transaction, and malformed tokens, before touching anything', () => {
    const isInvalid = (e: unknown): boolean =>
      isLeaseholdError(e) && e.code === 'ERR_INVALID_ARGUMENT';
    assert.throws(() => fenceInSqlite(db, { scope: 'report/d', token: 1n }), isInvalid);
    for (const token of ['007', '-1', '0', 5 as unknown as string]) {
      assert.throws(
        () => db.transaction(() => fenceInSqlite(db, { scope: 'report/d', token })).immediate(),
        isInvalid,
        String(token),
      );
    }
    assert.equal(mark('report/d'), 0n);
  });
});
