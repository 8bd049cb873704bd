import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { tempDir } from '../../support/tmp.js';

// SqliteFence.claim: claim before start (DESIGN §4, I9). The rule under test, the same in
// every fence: a claim at T is applied exactly when a write at T would pass, leaves the mark
// at T, and does not use T's write — under '>' the first write at T still passes.

const tmp = tempDir('sqlite-fence-claim');
after(() => tmp.remove());
let n = 0;
const dbPath = (): string => join(tmp.dir, `claim-${++n}.db`);

function setup(policy: '>=' | '>' = '>='): {
  db: Database.Database;
  fence: SqliteFence;
  write: (token: bigint, body: string) => string;
  body: () => string | undefined;
} {
  const db = new Database(dbPath());
  db.exec('CREATE TABLE report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
  const fence = new SqliteFence({ database: db, policy });
  const upsert = db.prepare(
    'INSERT INTO report (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body',
  );
  return {
    db,
    fence,
    write: (token, body) =>
      fence.apply('report/july', token, () => upsert.run('july', body)).status,
    body: () =>
      (
        db.prepare("SELECT body FROM report WHERE id = 'july'").get() as
          { body: string } | undefined
      )?.body,
  };
}

describe('SqliteFence.claim', () => {
  for (const policy of ['>=', '>'] as const) {
    it(`policy '${policy}': a claim at 42 refuses token 41 before 42 has written anything`, () => {
      const { fence, write, body } = setup(policy);
      assert.equal(write(41n, 'by-41'), 'applied');
      assert.deepEqual(fence.claim('report/july', 42n), { status: 'applied' });
      assert.equal(fence.highWaterMark('report/july'), 42n);
      assert.equal(write(41n, 'late-41'), 'stale_fence');
      assert.equal(write(40n, 'later-40'), 'stale_fence');
      assert.equal(body(), 'by-41', 'no domain write by the claim, none by the stale writer');
    });

    it(`policy '${policy}': re-claiming the same token is idempotent`, () => {
      const { fence } = setup(policy);
      assert.deepEqual(fence.claim('report/july', 42n), { status: 'applied' });
      assert.deepEqual(fence.claim('report/july', 42n), { status: 'applied' });
      assert.deepEqual(fence.claim('report/july', '42'), { status: 'applied' });
      assert.equal(fence.highWaterMark('report/july'), 42n);
    });

    it(`policy '${policy}': a claim below a newer claim or write is stale and changes nothing`, () => {
      const { fence, write } = setup(policy);
      assert.deepEqual(fence.claim('report/july', 43n), { status: 'applied' });
      assert.deepEqual(fence.claim('report/july', 42n), {
        status: 'stale_fence',
        highWaterMark: 43n,
      });
      assert.equal(write(44n, 'by-44'), 'applied');
      assert.deepEqual(fence.claim('report/july', 43n), {
        status: 'stale_fence',
        highWaterMark: 44n,
      });
      assert.equal(fence.highWaterMark('report/july'), 44n);
    });
  }

  it("policy '>=': after a claim the same token writes as often as before", () => {
    const { fence, write, body } = setup('>=');
    assert.equal(fence.claim('report/july', 42n).status, 'applied');
    assert.equal(write(42n, 'first'), 'applied');
    assert.equal(write(42n, 'second'), 'applied');
    assert.deepEqual(fence.claim('report/july', 42n), { status: 'applied' });
    assert.equal(body(), 'second');
  });

  it("policy '>': the claim does not use the grant's one write; the first write at 42 passes, the second is refused", () => {
    const { fence, write, body } = setup('>');
    assert.equal(write(41n, 'by-41'), 'applied');
    assert.equal(fence.claim('report/july', 42n).status, 'applied');
    assert.equal(fence.claim('report/july', 42n).status, 'applied', 'idempotent before the write');
    assert.equal(write(41n, 'late-41'), 'stale_fence');
    assert.equal(write(42n, 'first'), 'applied');
    assert.equal(write(42n, 'second'), 'stale_fence');
    assert.deepEqual(
      fence.claim('report/july', 42n),
      { status: 'stale_fence', highWaterMark: 42n },
      "after 42's write, its claim answers that the write is spent",
    );
    assert.equal(body(), 'first');
    assert.equal(write(43n, 'by-43'), 'applied');
  });

  it("a claim through a '>=' fence leaves a '>' fence on the same table its first write (the gateway's routes share one table)", () => {
    const { db, fence: ge } = setup('>=');
    const gt = new SqliteFence({ database: db, policy: '>' });
    assert.equal(ge.claim('s', 7n).status, 'applied');
    assert.equal(gt.apply('s', 6n, () => null).status, 'stale_fence');
    assert.equal(gt.apply('s', 7n, () => null).status, 'applied');
    assert.equal(gt.apply('s', 7n, () => null).status, 'stale_fence');
    assert.equal(ge.apply('s', 7n, () => null).status, 'applied');
  });

  it('keeps the claimed mark, and under > its unused write, across a re-open of the file', () => {
    const path = dbPath();
    const a = new SqliteFence({ path, policy: '>' });
    assert.equal(a.claim('s', 12n).status, 'applied');
    a.close();
    const b = new SqliteFence({ path, policy: '>' });
    assert.equal(b.highWaterMark('s'), 12n);
    assert.equal(b.apply('s', 11n, () => null).status, 'stale_fence');
    assert.equal(b.apply('s', 12n, () => null).status, 'applied');
    b.close();
    const c = new SqliteFence({ path, policy: '>' });
    assert.equal(c.apply('s', 12n, () => null).status, 'stale_fence');
    c.close();
  });

  it('adds the claimed column to a mark table made before claims, keeping its marks', () => {
    const path = dbPath();
    const old = new Database(path);
    old.exec(
      'CREATE TABLE leasehold_fence (scope TEXT PRIMARY KEY NOT NULL, hwm INTEGER NOT NULL CHECK (hwm > 0)) STRICT',
    );
    old.prepare("INSERT INTO leasehold_fence VALUES ('s', 9)").run();
    old.close();
    const fence = new SqliteFence({ path, policy: '>' });
    assert.equal(fence.highWaterMark('s'), 9n);
    assert.equal(fence.apply('s', 9n, () => null).status, 'stale_fence', 'an old mark is no claim');
    assert.equal(fence.claim('s', 10n).status, 'applied');
    assert.equal(fence.apply('s', 10n, () => null).status, 'applied');
    fence.close();
  });

  it('refuses malformed tokens and scopes with ERR_INVALID_ARGUMENT, touching nothing', () => {
    const { fence } = setup();
    for (const bad of [41, '007', ' 5', '1e3', '', '0', '-1', '9223372036854775808', null]) {
      assert.throws(
        () => fence.claim('s', bad as unknown as bigint),
        (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
        String(bad),
      );
    }
    for (const bad of ['', 7, undefined])
      assert.throws(
        () => fence.claim(bad as unknown as string, 5n),
        (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
      );
    assert.equal(fence.highWaterMark('s'), 0n);
  });

  it("is told to onDecision with op 'claim' (the mark when refused)", () => {
    const seen: unknown[] = [];
    const fence = new SqliteFence({ path: dbPath(), onDecision: (d) => seen.push(d) });
    assert.equal(fence.claim('s', 3n).status, 'applied');
    assert.equal(fence.claim('s', 2n).status, 'stale_fence');
    assert.deepEqual(seen, [
      { scope: 's', token: 3n, status: 'applied', op: 'claim' },
      { scope: 's', token: 2n, status: 'stale_fence', op: 'claim', highWaterMark: 3n },
    ]);
    fence.close();
  });
});
