import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteFence, type FenceDecision } from '../../../src/fencing/sqlite.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { tempDir } from '../../support/tmp.js';

const tmp = tempDir('sqlite-fence');
after(() => tmp.remove());
let n = 0;
const dbPath = (): string => join(tmp.dir, `fence-${++n}.db`);

function setup(policy: '>=' | '>' = '>='): {
  db: Database.Database;
  fence: SqliteFence;
  write: (token: bigint | string, body: string, opId?: string) => string;
} {
  const db = new Database(dbPath());
  db.exec('CREATE TABLE report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
  const fence = new SqliteFence({ database: db, policy });
  const upsert = db.prepare(
    'INSERT INTO report (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body',
  );
  const write = (token: bigint | string, body: string, opId?: string): string =>
    fence.apply(
      'report/july',
      token,
      () => upsert.run('july', body),
      opId === undefined ? {} : { opId },
    ).status;
  return { db, fence, write };
}

const body = (db: Database.Database): unknown =>
  (db.prepare("SELECT body FROM report WHERE id = 'july'").get() as { body: string } | undefined)
    ?.body;

describe('SqliteFence', () => {
  it('rejects token 41 after token 42 was accepted, and leaves the data as 42 wrote it', () => {
    const { db, fence, write } = setup();
    assert.equal(write(41n, 'v41'), 'applied');
    assert.equal(write(42n, 'v42'), 'applied');
    const r = fence.apply('report/july', 41n, () =>
      assert.fail('mutate must not run for a stale token'),
    );
    assert.deepEqual(r, { status: 'stale_fence', highWaterMark: 42n });
    assert.equal(body(db), 'v42');
    assert.equal(fence.highWaterMark('report/july'), 42n);
    assert.equal(fence.highWaterMark('other'), 0n);
  });

  it("policy '>=' lets several writes under one token through; '>' allows one write per grant", () => {
    const ge = setup('>=');
    assert.equal(ge.write(7n, 'a'), 'applied');
    assert.equal(ge.write(7n, 'b'), 'applied');
    const gt = setup('>');
    assert.equal(gt.write(7n, 'a'), 'applied');
    assert.equal(gt.write(7n, 'b'), 'stale_fence');
    assert.equal(body(gt.db), 'a');
  });

  it('answers duplicate for a replayed (token, opId) without applying it again', () => {
    const { db, write } = setup();
    assert.equal(write(5n, 'x', 'op-1'), 'applied');
    assert.equal(write(5n, 'y', 'op-1'), 'duplicate');
    assert.equal(body(db), 'x');
    assert.equal(write(5n, 'z', 'op-2'), 'applied');
    assert.equal(write(6n, 'w', 'op-1'), 'applied');
  });

  it('compares tokens as 64-bit integers, never as strings or doubles', () => {
    const { write, fence } = setup();
    assert.equal(write('10', 'ten'), 'applied');
    assert.equal(write('9', 'nine'), 'stale_fence');
    assert.equal(write(2n ** 53n + 1n, 'big'), 'applied');
    assert.equal(write(2n ** 53n, 'smaller'), 'stale_fence');
    assert.equal(fence.highWaterMark('report/july'), 2n ** 53n + 1n);
    assert.equal(write('9223372036854775807', 'max'), 'applied');
  });

  it('refuses malformed tokens before touching the database', () => {
    const { fence } = setup();
    for (const bad of [
      41,
      '007',
      ' 5',
      '+5',
      '1e3',
      '0x10',
      '',
      '0',
      '-1',
      '9223372036854775808',
      null,
      true,
    ]) {
      assert.throws(
        () => fence.apply('s', bad as unknown as bigint, () => null),
        (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
        String(bad),
      );
    }
    assert.equal(fence.highWaterMark('s'), 0n);
  });

  it('rolls the mark back with the data when the mutation throws', () => {
    const { db, fence, write } = setup();
    assert.equal(write(3n, 'three'), 'applied');
    assert.throws(
      () =>
        fence.apply('report/july', 9n, () => {
          db.prepare("UPDATE report SET body = 'half'").run();
          throw new Error('boom');
        }),
      /boom/,
    );
    assert.equal(fence.highWaterMark('report/july'), 3n);
    assert.equal(body(db), 'three');
    assert.equal(write(4n, 'four'), 'applied');
  });

  it('keeps the mark across a re-open of the file', () => {
    const path = dbPath();
    const a = new SqliteFence({ path });
    assert.equal(a.apply('s', 12n, () => null).status, 'applied');
    a.close();
    const b = new SqliteFence({ path });
    assert.equal(b.apply('s', 11n, () => null).status, 'stale_fence');
    assert.equal(b.highWaterMark('s'), 12n);
    b.close();
  });

  it('refuses bad options', () => {
    assert.throws(
      () => new SqliteFence({ path: ':memory:' }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => new SqliteFence({ path: dbPath(), table: 'x; DROP TABLE y' }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => new SqliteFence({ path: dbPath(), policy: '<' as '>' }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => new SqliteFence({ path: dbPath(), onDecision: 'log' as never }),
      (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /onDecision/.test(e.message),
    );
  });

  it('tells onDecision each final decision after it committed, with the mark on stale_fence', () => {
    const db = new Database(dbPath());
    db.exec('CREATE TABLE report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
    const seen: Array<FenceDecision & { committedMark: bigint }> = [];
    const fence: SqliteFence = new SqliteFence({
      database: db,
      // The mark read inside the hook shows the decision is already committed.
      onDecision: (d) => seen.push({ ...d, committedMark: fence.highWaterMark(d.scope) }),
    });
    const put = (token: bigint, opId?: string): string =>
      fence.apply(
        'report/july',
        token,
        () => db.prepare("INSERT OR REPLACE INTO report VALUES ('july', ?)").run(String(token)),
        opId === undefined ? {} : { opId },
      ).status;
    assert.equal(put(42n, 'op-1'), 'applied');
    assert.equal(put(42n, 'op-1'), 'duplicate');
    assert.equal(put(41n), 'stale_fence');
    assert.deepEqual(seen, [
      { scope: 'report/july', token: 42n, status: 'applied', committedMark: 42n },
      { scope: 'report/july', token: 42n, status: 'duplicate', committedMark: 42n },
      {
        scope: 'report/july',
        token: 41n,
        status: 'stale_fence',
        highWaterMark: 42n,
        committedMark: 42n,
      },
    ]);
  });

  it('is not told when the mutation throws, and a throwing hook changes no outcome', () => {
    const db = new Database(dbPath());
    let calls = 0;
    const fence = new SqliteFence({
      database: db,
      onDecision: () => {
        calls++;
        throw new Error('monitor down');
      },
    });
    assert.throws(
      () =>
        fence.apply('s', 5n, () => {
          throw new Error('boom');
        }),
      /boom/,
    );
    assert.equal(calls, 0, 'a rolled-back write is no decision');
    assert.deepEqual(
      fence.apply('s', 5n, () => 'ok'),
      { status: 'applied', value: 'ok' },
    );
    assert.equal(fence.apply('s', 4n, () => 'no').status, 'stale_fence');
    assert.equal(calls, 2);
    assert.equal(fence.highWaterMark('s'), 5n);
  });
});
