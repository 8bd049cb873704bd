import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { StoreRequestOptions } from '../../../src/core/store.js';
import {
  channelName,
  quoteIdent,
  renderSql,
  type PgPool,
} from '../../../src/drivers/postgres/client.js';
import { interestTableName } from '../../../src/stores/postgres/migrate.js';
import * as Q from '../../../src/stores/postgres/queries.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { eventually } from '../../support/time.js';

// Decision 014: releases and grants notify only keys someone registered interest in. These
// tests drive the interleavings of a registration and a release with real sessions: one side
// holds its transaction open, the other is seen waiting for it in pg_locks, then the first
// commits. No sleeps decide an order.

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });
const TABLE = 'coordination_lease';

/** The current transaction id of `c` (it must have written), as pg_locks shows it. */
async function xidOf(c: pg.Client): Promise<string> {
  const r = await c.query<{ xid: string }>(
    'SELECT backend_xid::text AS xid FROM pg_stat_activity WHERE pid = pg_backend_pid()',
  );
  const xid = r.rows[0]?.xid;
  assert.ok(xid, 'the holding session has a transaction id');
  return xid;
}

/** Resolves once some session waits for transaction `xid` (a row lock it holds). */
function someoneWaitsOn(admin: pg.Client, xid: string): Promise<true> {
  return eventually(`a session waiting on transaction ${xid}`, async () => {
    const r = await admin.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM pg_locks
       WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted`,
      [xid],
    );
    return r.rows[0]?.n !== '0' ? true : undefined;
  });
}

/** Notifications on the table's channel, in the order the server delivered them. */
async function channelLog(
  schema: string,
): Promise<{ payloads: string[]; client: pg.Client; next: (p: string) => Promise<void> }> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const payloads: string[] = [];
  client.on('notification', (m) => payloads.push(m.payload ?? ''));
  await client.query(`LISTEN ${quoteIdent(channelName(schema, TABLE))}`);
  const next = async (p: string): Promise<void> => {
    await eventually(`notification ${JSON.stringify(p)}`, () =>
      payloads.includes(p) ? true : undefined,
    );
  };
  return { payloads, client, next };
}

describe('PostgreSQL waiter interest (decision 014)', () => {
  const schema = uniqueSchema('interest');
  const lease = `${quoteIdent(schema)}.${quoteIdent(TABLE)}`;
  const interest = interestTableName(schema, TABLE);
  const sent: string[] = [];
  let pool: pg.Pool;
  let store: PostgresLeaseStore;
  let admin: pg.Client;
  let holdRelease: pg.Client;

  before(async () => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
    pool.on('error', () => undefined);
    // The application's own pool, seen through a wrapper that records what the store sends.
    const recording: PgPool = {
      query: (text: string) => {
        sent.push(text);
        return pool.query(text);
      },
      connect: () => pool.connect(),
      end: () => Promise.resolve(),
      options: pool.options,
    };
    store = new PostgresLeaseStore({ pool: recording, schema });
    await store.migrate();
    admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    holdRelease = new pg.Client({ connectionString: PG_URL });
    await holdRelease.connect();
  });

  after(async () => {
    await store.close();
    await holdRelease.end();
    await admin.end();
    await pool.end();
    await dropSchema(schema);
  });

  async function holder(key: string): Promise<{ leaseId: string; token: bigint }> {
    const leaseId = randomUUID();
    const r = await store.tryAcquire(
      { key, leaseId, ownerId: 'holder', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal(r.status, 'acquired');
    return { leaseId, token: r.status === 'acquired' ? r.token : 0n };
  }

  it('a registration that meets a release in progress waits for its commit, and the re-check then sees the key free', async () => {
    const key = uniqueKey('reg-waits');
    const h = await holder(key);
    // The release holds its row lock, uncommitted; its trigger found no interest.
    await holdRelease.query('BEGIN');
    const released = await holdRelease.query(
      renderSql(Q.RELEASE.replaceAll('{{lease}}', lease), [key, h.leaseId, h.token]),
    );
    assert.equal(released.rowCount, 1);
    const xid = await xidOf(holdRelease);
    let settled = false;
    const watching = store
      .watch(key, () => undefined)
      .finally(() => {
        settled = true;
      });
    await someoneWaitsOn(admin, xid);
    assert.equal(settled, false, 'the watch must not resolve while the release is uncommitted');
    await holdRelease.query('COMMIT');
    const unwatch = await watching;
    try {
      // The caller re-checks after the watch resolved: the release is visible.
      const state = await store.inspect(key, OPTS());
      assert.equal(state.holder, undefined);
      assert.equal(state.lastToken, h.token);
    } finally {
      unwatch();
    }
  });

  it('a release that meets a registration in progress waits for it, then sees the interest and notifies', async () => {
    const key = uniqueKey('rel-waits');
    const h = await holder(key);
    const log = await channelLog(schema);
    try {
      // A waiter's registration (REGISTER_INTEREST), held open in its own session.
      const reg = new pg.Client({ connectionString: PG_URL });
      await reg.connect();
      try {
        await reg.query('BEGIN');
        await reg.query(
          renderSql(
            Q.REGISTER_INTEREST.replaceAll('{{lease}}', lease).replaceAll('{{interest}}', interest),
            [[key], randomUUID(), 60_000],
          ),
        );
        const xid = await xidOf(reg);
        const releasing = store.release({ key, leaseId: h.leaseId, token: h.token }, OPTS());
        await someoneWaitsOn(admin, xid);
        await reg.query('COMMIT');
        assert.deepEqual(await releasing, { status: 'released' });
        await log.next(key);
      } finally {
        await reg.end();
      }
    } finally {
      await log.client.end();
    }
  });

  it('notifies only keys with interest: a release of an unwatched key sends nothing, a watched one wakes its watcher', async () => {
    const quiet = uniqueKey('quiet');
    const watched = uniqueKey('watched');
    const q = await holder(quiet);
    const w = await holder(watched);
    const log = await channelLog(schema);
    let woken = 0;
    const unwatch = await store.watch(watched, () => woken++);
    try {
      assert.deepEqual(await store.release({ key: quiet, ...q }, OPTS()), { status: 'released' });
      assert.deepEqual(await store.release({ key: watched, ...w }, OPTS()), {
        status: 'released',
      });
      // Notifications arrive in commit order: when the second is here, the first would be too.
      await log.next(watched);
      assert.deepEqual(log.payloads, [watched]);
      await eventually('the watcher to be woken', () => (woken > 0 ? true : undefined));
      // A grant of the watched key is announced to observers; one of the quiet key is not.
      await holder(quiet);
      await holder(watched);
      await log.next(`\u0001${watched}`);
      assert.deepEqual(log.payloads, [watched, `\u0001${watched}`]);
    } finally {
      unwatch();
      await log.client.end();
    }
  });

  it("wakes a registered waiter when a program runs the seed's own release on the table", async () => {
    const key = uniqueKey('seed-release');
    const h = await holder(key);
    let woken = 0;
    const unwatch = await store.watch(key, () => woken++);
    try {
      const r = await admin.query(
        `UPDATE ${lease} SET owner_id = NULL, lease_until = '-infinity'::timestamptz
         WHERE resource_key = $1 AND owner_id = $2 AND fencing_token = $3`,
        [key, h.leaseId, h.token.toString()],
      );
      assert.equal(r.rowCount, 1);
      await eventually('the watcher to be woken', () => (woken > 0 ? true : undefined));
    } finally {
      unwatch();
    }
  });

  it("watching a key never granted leaves a row the seed's upsert and a grant both turn into token 1", async () => {
    const a = uniqueKey('never-granted-a');
    const b = uniqueKey('never-granted-b');
    const unwatchA = await store.watch(a, () => undefined);
    const unwatchB = await store.watch(b, () => undefined);
    try {
      assert.deepEqual(await store.inspect(a, OPTS()), {
        key: a,
        lastToken: 0n,
        holder: undefined,
      });
      const seed = await admin.query<{ fencing_token: string }>(
        `INSERT INTO ${lease} (resource_key, owner_id, lease_until, fencing_token)
         VALUES ($1, $2, clock_timestamp() + interval '1 minute', 1)
         ON CONFLICT (resource_key) DO UPDATE
         SET owner_id = EXCLUDED.owner_id, lease_until = clock_timestamp() + interval '1 minute',
             fencing_token = ${lease}.fencing_token + 1
         WHERE ${lease}.lease_until <= clock_timestamp()
         RETURNING fencing_token::text`,
        [a, randomUUID()],
      );
      assert.equal(seed.rows[0]?.fencing_token, '1');
      assert.equal((await holder(b)).token, 1n);
    } finally {
      unwatchA();
      unwatchB();
    }
  });

  it('a release commits without waiting for its WAL flush; grants and renewals keep synchronous commit', async () => {
    const key = uniqueKey('commit-modes');
    sent.length = 0;
    const h = await holder(key);
    await store.renew({ key, ...h, ttlMs: 60_000 }, OPTS());
    await store.release({ key, ...h }, OPTS());
    // A lone grant and a lone release set their commit mode inside their call (migration
    // 0005; since 0006 the argument before the listener id); the renewal still sends SET LOCAL.
    const grant = sent.find((t) => t.includes('_grant"('));
    const renew = sent.find((t) => t.includes('RETURNING extract(epoch FROM lease_until)'));
    const release = sent.find((t) => t.includes('_release"('));
    // The incarnation check (decision 042) opens every write message.
    const check =
      /^SELECT COALESCE\(NULLIF\(current_setting\('leasehold\.incarnation_[0-9a-f]+', true\), ''\), [^;]+\) AS incarnation; /;
    assert.match(grant ?? '', check);
    assert.match((grant ?? '').replace(check, ''), /^SET LOCAL statement_timeout = \d+; /);
    assert.match(grant ?? '', /, \d+::int, 'on', (NULL|'[0-9a-f-]{36}')\)\s*$/);
    assert.match(renew ?? '', /SET LOCAL synchronous_commit = on;/);
    assert.match(release ?? '', /^SET LOCAL statement_timeout = \d+; /, 'a release goes unchecked');
    assert.match(release ?? '', /, \d+::int, 'off', (NULL|'[0-9a-f-]{36}')\)\s*$/);
    assert.doesNotMatch(release ?? '', /synchronous_commit = on|'on'/);
  });
});
