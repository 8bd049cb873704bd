import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { StoreAcquireResult, StoreRequestOptions } from '../../../src/core/store.js';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { eventually } from '../../support/time.js';

// Decision 022: a store with its own pool wakes its watchers from the answers of its own
// releases and grants, and drops the notifications those statements send; notifications
// from anyone else's statements still wake. Notifications arrive in commit order, so "no
// second wake-up" is checked by waiting for a later foreign notification, not for a time.

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

function ask(key: string, leaseId = randomUUID()) {
  return { key, leaseId, ownerId: 'own-wakeups', ttlMs: 60_000, value: undefined };
}

function tokenOf(r: StoreAcquireResult): bigint {
  assert.equal(r.status, 'acquired');
  return (r as { token: bigint }).token;
}

/** The seed's release, as another program runs it on its own connection. */
const SEED_RELEASE = (table: string): string =>
  `UPDATE ${table} SET owner_id = NULL, lease_until = '-infinity'::timestamptz
   WHERE resource_key = $1 AND owner_id = $2 AND fencing_token = $3`;

describe('PostgresLeaseStore wakes its own watchers from its answers (decision 022)', () => {
  const schema = uniqueSchema('ownwake');
  const table = `${quoteIdent(schema)}.coordination_lease`;
  let store: PostgresLeaseStore;
  let admin: pg.Client;

  before(async () => {
    store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 4 });
    await store.migrate();
    admin = new pg.Client({ connectionString: PG_URL });
    admin.on('error', () => undefined);
    await admin.connect();
  });
  after(async () => {
    await store?.close();
    await admin?.end();
    await dropSchema(schema);
  });

  /**
   * The commit records since `start`, each with whether it was flushed when this is called
   * (right after the answer being checked), and the xid of `key`'s row (its last writer). The
   * read ends at the flush position of now: pg_walinspect reads no further, and other sessions
   * may have inserted WAL beyond it; a commit flushed only after the answer is still found,
   * and told apart by `flushed`.
   */
  async function grantCommit(
    key: string,
    start: string,
  ): Promise<{ xmin: string; commits: { xid: string; flushed: boolean }[] }> {
    const flushed = (
      await admin.query<{ l: string }>('SELECT pg_current_wal_flush_lsn()::text AS l')
    ).rows[0]!.l;
    const xmin = (
      await admin.query<{ x: string }>(
        `SELECT xmin::text AS x FROM ${table} WHERE resource_key = $1`,
        [key],
      )
    ).rows[0]!.x;
    const commits = await admin.query<{ xid: string; flushed: boolean }>(
      `SELECT xid::text AS xid, end_lsn <= $2::pg_lsn AS flushed
       FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn())
       WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT'`,
      [start, flushed],
    );
    return { xmin, commits: commits.rows };
  }

  it('wakes a watcher before its own release is answered, once, and still wakes on a foreign release', async () => {
    const mine = uniqueKey('mine');
    const foreign = uniqueKey('foreign');
    const wakes = { mine: 0, foreign: 0 };
    const granted = { mine: 0 };
    const a = ask(mine);
    const b = ask(foreign);
    const ta = tokenOf(await store.tryAcquire(a, OPTS()));
    const tb = tokenOf(await store.tryAcquire(b, OPTS()));
    const unwatchMine = await store.watch(mine, (change) => {
      if (change === 'granted') granted.mine++;
      else wakes.mine++;
    });
    const unwatchForeign = await store.watch(foreign, (change) => {
      if (change !== 'granted') wakes.foreign++;
    });
    try {
      const released = store.release({ key: mine, leaseId: a.leaseId, token: ta }, OPTS());
      assert.equal((await released).status, 'released');
      assert.equal(wakes.mine, 1, 'woken by the answer, before release() resolved');

      // A release by another program (its own connection): its notification wakes. Sent
      // after ours committed, it arrives after our release's notification would have.
      await admin.query(SEED_RELEASE(table), [foreign, b.leaseId, tb.toString()]);
      await eventually('the foreign release to wake its watcher', () =>
        wakes.foreign === 1 ? true : undefined,
      );
      assert.equal(wakes.mine, 1, "our own release's notification was not delivered again");

      // A grant of our own is told as 'granted' from its answer, once.
      tokenOf(await store.tryAcquire(ask(mine), OPTS()));
      assert.equal(granted.mine, 1);
      // Another program takes the foreign key and releases it: its notification comes after
      // our grant's notice would have.
      const other = randomUUID();
      const t3 = (
        await admin.query<{ t: string }>(
          `UPDATE ${table} SET owner_id = $2, lease_until = clock_timestamp() + interval '1 minute',
             fencing_token = fencing_token + 1
           WHERE resource_key = $1 RETURNING fencing_token::text AS t`,
          [foreign, other],
        )
      ).rows[0]!.t;
      await admin.query(SEED_RELEASE(table), [foreign, other, t3]);
      await eventually('the second foreign release to wake its watcher', () =>
        wakes.foreign === 2 ? true : undefined,
      );
      assert.equal(granted.mine, 1, "our own grant's notice was not delivered again");
      assert.equal(wakes.mine, 1);
    } finally {
      unwatchMine();
      unwatchForeign();
    }
  });

  it('makes the grant after an unflushed release durable before it answers, and with it the release', async () => {
    const ext = await admin.query(`SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect'`);
    if (ext.rows.length === 0) await admin.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const key = uniqueKey('durable');
    const first = ask(key);
    const t1 = tokenOf(await store.tryAcquire(first, OPTS()));
    const start = (
      await admin.query<{ l: string }>('SELECT pg_current_wal_insert_lsn()::text AS l')
    ).rows[0]!.l;
    assert.equal(
      (await store.release({ key, leaseId: first.leaseId, token: t1 }, OPTS())).status,
      'released',
    );
    // Another session sees the release at once (an asynchronous commit is visible when it
    // answers), so the next grant takes the key.
    const seen = await admin.query<{ owner: string | null; x: string }>(
      `SELECT owner_id::text AS owner, xmin::text AS x FROM ${table} WHERE resource_key = $1`,
      [key],
    );
    assert.equal(seen.rows[0]?.owner, null);
    // The release's own transaction: other sessions on this server (other tests, other
    // clients' asynchronous commits) write to the WAL too, so commits are told apart by xid.
    const releaseXid = seen.rows[0].x;
    const second = ask(key);
    const t2 = tokenOf(await store.tryAcquire(second, OPTS()));
    assert.equal(t2, t1 + 1n);
    // The commit records of the release and of the grant, found by their transaction ids.
    const { xmin, commits } = await grantCommit(key, start);
    const grant = commits.find((c) => c.xid === xmin);
    assert.ok(grant, `the grant's commit record (xid ${xmin}) is in the WAL`);
    assert.equal(grant.flushed, true, "the grant's commit was flushed before it answered");
    const release = commits.find((c) => c.xid === releaseXid);
    assert.ok(release, `the release's commit record (xid ${releaseXid}) is in the WAL`);
    assert.equal(release.flushed, true, "the release's commit was flushed with the grant's");
  });

  it("keeps a lone grant durable and a lone release asynchronous when the session's default is off", async () => {
    // A user may set the database's default to off; a grant must still be flushed before its
    // token is returned (migration 0005 sets the commit mode inside the call, not by SET).
    const ext = await admin.query(`SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect'`);
    if (ext.rows.length === 0) await admin.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const offStore = new PostgresLeaseStore({
      connection: { connectionString: PG_URL, options: '-c synchronous_commit=off' },
      schema,
      maxConnections: 1,
    });
    try {
      const key = uniqueKey('durable-off');
      const start = (
        await admin.query<{ l: string }>('SELECT pg_current_wal_insert_lsn()::text AS l')
      ).rows[0]!.l;
      const first = ask(key);
      const t1 = tokenOf(await offStore.tryAcquire(first, OPTS()));
      // Read at once after the answer: nothing else of ours wrote since.
      const { xmin, commits } = await grantCommit(key, start);
      const grant = commits.find((c) => c.xid === xmin);
      assert.ok(grant, `the grant's commit record (xid ${xmin}) is in the WAL`);
      assert.equal(grant.flushed, true, "the grant's commit was flushed before it answered");
      // The commit modes are the transaction's own: the session's default is untouched.
      const checked = await (offStore as unknown as { pool: pg.Pool }).pool.query<{
        s: string;
      }>("SELECT current_setting('synchronous_commit') AS s");
      assert.equal(checked.rows[0]?.s, 'off');
      assert.equal(
        (await offStore.release({ key, leaseId: first.leaseId, token: t1 }, OPTS())).status,
        'released',
      );
      const after = await (offStore as unknown as { pool: pg.Pool }).pool.query<{
        s: string;
        l: string;
      }>("SELECT current_setting('synchronous_commit') AS s, current_setting('lock_timeout') AS l");
      const plain = (
        await admin.query<{ l: string }>("SELECT current_setting('lock_timeout') AS l")
      ).rows[0]!.l;
      assert.deepEqual(
        after.rows[0],
        { s: 'off', l: plain },
        'nothing leaks to the next statement',
      );
      // The key exists and is free now: the grant takes the one-UPDATE path of migration
      // 0007, which must set the commit mode before its write just the same.
      const again = ask(key);
      const t2 = tokenOf(await offStore.tryAcquire(again, OPTS()));
      assert.equal(t2, t1 + 1n);
      const second = await grantCommit(key, start);
      const regrant = second.commits.find((c) => c.xid === second.xmin);
      assert.ok(regrant, `the second grant's commit record (xid ${second.xmin}) is in the WAL`);
      assert.equal(
        regrant.flushed,
        true,
        "the second grant's commit was flushed before it answered",
      );
    } finally {
      await offStore.close();
    }
  });
});
