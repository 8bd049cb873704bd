import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { StoreRequestOptions } from '../../../src/core/store.js';
import { quoteIdent, quoteLiteral, renderSql } from '../../../src/drivers/postgres/client.js';
import {
  acquireFunctionName,
  grantNoticeFunctionName,
  migratePostgresLeaseStore,
} from '../../../src/stores/postgres/migrate.js';
import * as Q from '../../../src/stores/postgres/queries.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../../support/postgres.js';
import { elapse, eventually } from '../../support/time.js';

const OPTS = (timeoutMs = 5000): StoreRequestOptions => ({
  timeoutMs,
  signal: new AbortController().signal,
});

function leaseTable(schema: string, table = 'coordination_lease'): string {
  return `${quoteIdent(schema)}.${quoteIdent(table)}`;
}

interface RowVersion {
  xmin: string;
  xmax: string;
  ctid: string;
  token: string;
}

async function rowVersion(c: pg.Client, table: string, key: string): Promise<RowVersion> {
  const r = await c.query<RowVersion>(
    `SELECT xmin::text, xmax::text, ctid::text, fencing_token::text AS token FROM ${table} WHERE resource_key = $1`,
    [key],
  );
  assert.equal(r.rows.length, 1, `row for ${key}`);
  return r.rows[0]!;
}

describe('PostgresLeaseStore', () => {
  const schema = uniqueSchema('store');
  const table = leaseTable(schema);
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

  it('renewMany reports for each renewed lease an expiry no later than the one it stored, and none for a lost one', async () => {
    const asks = [60_000, 30_000, 45_000].map((ttlMs, i) => ({
      key: uniqueKey(`renew-many-${i}`),
      leaseId: randomUUID(),
      ownerId: 'renewer',
      ttlMs,
      value: undefined,
    }));
    const leases = [];
    for (const a of asks) {
      const r = await store.tryAcquire(a, OPTS());
      assert.equal(r.status, 'acquired');
      leases.push({
        key: a.key,
        leaseId: a.leaseId,
        token: (r as { token: bigint }).token,
        ttlMs: a.ttlMs,
      });
    }
    // The second one's token is not the holder's: it is lost and answered so, alone.
    const asked = [leases[0]!, { ...leases[1]!, token: leases[1]!.token + 1n }, leases[2]!];
    const results = await store.renewMany(asked, OPTS());
    assert.deepEqual(
      results.map((r) => r.status),
      ['renewed', 'lost', 'renewed'],
    );
    for (const i of [0, 2]) {
      const stored = await admin.query<{ ms: number }>(
        `SELECT extract(epoch FROM lease_until)::float8 * 1000 AS ms FROM ${table} WHERE resource_key = $1`,
        [asked[i]!.key],
      );
      const reported = (results[i] as { expiresAtWallMs?: number }).expiresAtWallMs;
      assert.ok(reported !== undefined, 'an expiry is reported');
      const ms = Number(stored.rows[0]!.ms);
      assert.ok(reported <= ms, `reported ${reported} is not after the stored ${ms}`);
      // Early by at most the statement's own duration: generous bound for a loaded machine.
      assert.ok(ms - reported < 5_000, `reported ${reported} is within 5 s of the stored ${ms}`);
    }
  });

  it('answers busy without locking the row or taking a transaction id, unlike the plain upsert', async () => {
    const key = uniqueKey('nowrite');
    const holder = randomUUID();
    const granted = await store.tryAcquire(
      { key, leaseId: holder, ownerId: 'holder', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal(granted.status, 'acquired');
    const before = await rowVersion(admin, table, key);

    for (let i = 0; i < 200; i++) {
      const r = await store.tryAcquire(
        {
          key,
          leaseId: randomUUID(),
          ownerId: `contender-${i}`,
          ttlMs: 60_000,
          value: 'x',
          // Half of them ask for a token block: a busy answer writes nothing either way.
          ...(i % 2 === 0 ? { tokenBlock: 8 } : {}),
        },
        OPTS(),
      );
      assert.equal(r.status, 'busy');
    }
    // The idempotent re-ask of the holder itself is a read too.
    const again = await store.tryAcquire(
      { key, leaseId: holder, ownerId: 'holder', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal(again.status, 'acquired');
    const after = await rowVersion(admin, table, key);
    assert.deepEqual(after, before, 'row version, lock marker and token must be untouched');
    assert.equal(after.xmax, '0', 'no locker may have been recorded on the row');

    // The same statement inside an explicit transaction: still no xid after a busy answer.
    const sql = renderSql(
      Q.ACQUIRE.replaceAll(
        '{{acquire_fn}}',
        acquireFunctionName(schema, 'coordination_lease'),
      ).replaceAll('{{grant_notice_fn}}', grantNoticeFunctionName(schema, 'coordination_lease')),
      [key, randomUUID(), 60_000, 'probe', null, 8],
    );
    await admin.query('BEGIN');
    const busy = await admin.query<{ status: string }>(sql);
    const xid = await admin.query<{ xid: string | null }>(
      'SELECT pg_current_xact_id_if_assigned()::text AS xid',
    );
    await admin.query('ROLLBACK');
    assert.equal(busy.rows[0]?.status, 'busy');
    assert.equal(xid.rows[0]!.xid, null, 'a busy answer must not assign a transaction id');

    // Control: the seed's plain upsert on the same live row does lock it and take an xid,
    // so the checks above can see a write when there is one.
    await admin.query('BEGIN');
    const plain = await admin.query(
      `INSERT INTO ${table} AS l (resource_key, owner_id, lease_until, fencing_token)
       VALUES ($1, $2, clock_timestamp() + interval '1 minute', 1)
       ON CONFLICT (resource_key) DO UPDATE SET owner_id = EXCLUDED.owner_id
       WHERE l.lease_until <= clock_timestamp() RETURNING fencing_token`,
      [key, randomUUID()],
    );
    const plainXid = await admin.query<{ xid: string | null }>(
      'SELECT pg_current_xact_id_if_assigned()::text AS xid',
    );
    await admin.query('COMMIT');
    assert.equal(plain.rowCount, 0, 'the plain upsert also answers "busy"');
    assert.notEqual(plainXid.rows[0]!.xid, null, 'but it takes a transaction id');
    assert.notEqual((await rowVersion(admin, table, key)).xmax, '0', 'and locks the row');

    const released = await store.release(
      { key, leaseId: holder, token: (granted as { token: bigint }).token },
      OPTS(),
    );
    assert.equal(released.status, 'released');
  });

  it('returns tokens above 2^53 exactly, even when the application parses int8 as a number', async () => {
    const key = uniqueKey('big');
    const first = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'a', ttlMs: 200, value: undefined },
      OPTS(),
    );
    assert.equal(first.status, 'acquired');
    const big = 2n ** 62n + 12345n;
    await admin.query(
      `UPDATE ${table} SET fencing_token = $2::bigint, lease_until = '-infinity' WHERE resource_key = $1`,
      [key, big.toString()],
    );
    const original = pg.types.getTypeParser(20) as (v: string) => unknown;
    pg.types.setTypeParser(20, (v: string) => Number.parseInt(v, 10));
    try {
      const next = await store.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'b', ttlMs: 5000, value: undefined },
        OPTS(),
      );
      assert.equal(next.status, 'acquired');
      assert.equal((next as { token: bigint }).token, big + 1n);
      assert.equal((await store.inspect(key, OPTS())).lastToken, big + 1n);
    } finally {
      pg.types.setTypeParser(20, original);
    }
  });

  it('bounds every statement by the request timeout: a grant blocked on a row lock fails unavailable, not hangs', async () => {
    const key = uniqueKey('locktimeout');
    const a = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'a', ttlMs: 150, value: undefined },
      OPTS(),
    );
    assert.equal(a.status, 'acquired');
    await elapse(300);
    const blocker = new pg.Client({ connectionString: PG_URL });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM ${table} WHERE resource_key = $1 FOR UPDATE`, [key]);
      const started = performance.now();
      await assert.rejects(
        store.tryAcquire(
          { key, leaseId: randomUUID(), ownerId: 'b', ttlMs: 5000, value: undefined },
          OPTS(400),
        ),
        (err: unknown) => {
          assert.ok(isLeaseholdError(err, 'ERR_UNAVAILABLE'), String(err));
          // statement_timeout (57014) or lock_timeout (55P03), whichever the server hit first.
          const code = (err.cause as { code?: string }).code ?? '';
          assert.ok(['57014', '55P03'].includes(code), `server-side timeout, got ${code}`);
          return true;
        },
      );
      const took = performance.now() - started;
      assert.ok(took >= 350 && took < 5000, `the statement gave up after ${took.toFixed(0)}ms`);
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    const b = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'b', ttlMs: 5000, value: undefined },
      OPTS(),
    );
    assert.equal(b.status, 'acquired', 'once the lock is gone the grant goes through');
  });

  it("sets the lone grant's and release's lock timeout inside their calls (migration 0005)", async () => {
    // The statement timeout (5 s) is far above the lock timeout given to the call (150 ms),
    // so a lock wait that ends in 55P03 well before 5 s was bounded by the call's setting.
    const key = uniqueKey('lock-in-call');
    const leaseId = randomUUID();
    const first = await store.tryAcquire(
      { key, leaseId, ownerId: 'a', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal(first.status, 'acquired');
    const token = (first as { token: bigint }).token;
    // A free row (granted and released) for the grant to wait on.
    const free = uniqueKey('lock-in-call-free');
    const other = {
      key: free,
      leaseId: randomUUID(),
      ownerId: 'a',
      ttlMs: 60_000,
      value: undefined,
    };
    const granted = await store.tryAcquire(other, OPTS());
    assert.equal(granted.status, 'acquired');
    const released = await store.release(
      { key: free, leaseId: other.leaseId, token: (granted as { token: bigint }).token },
      OPTS(),
    );
    assert.equal(released.status, 'released');
    const blocker = new pg.Client({ connectionString: PG_URL });
    const caller = new pg.Client({ connectionString: PG_URL });
    await blocker.connect();
    await caller.connect();
    const grantFn = `${quoteIdent(schema)}.${quoteIdent('coordination_lease_grant')}`;
    const releaseFn = `${quoteIdent(schema)}.${quoteIdent('coordination_lease_release')}`;
    try {
      await blocker.query('BEGIN');
      await blocker.query(
        `SELECT 1 FROM ${table} WHERE resource_key = ANY($1::text[]) ORDER BY resource_key FOR UPDATE`,
        [[key, free]],
      );
      const calls = [
        // The release waits for the row lock of its UPDATE.
        `SET LOCAL statement_timeout = 5000; SELECT ${releaseFn}(${quoteLiteral(key)}, '${leaseId}'::uuid, ${token}::bigint, 150, 'off')`,
        // A free row, locked: the grant waits in its upsert.
        `SET LOCAL statement_timeout = 5000; SELECT * FROM ${grantFn}(${quoteLiteral(free)}, '${randomUUID()}'::uuid, 1000, 'b', NULL, 1, 150, 'on')`,
      ];
      for (const text of calls) {
        const started = performance.now();
        await assert.rejects(caller.query(text), (err: unknown) => {
          assert.equal((err as { code?: string }).code, '55P03', String(err));
          return true;
        });
        const took = performance.now() - started;
        assert.ok(took < 4000, `the call gave up after ${took.toFixed(0)} ms`);
      }
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
      await caller.end();
    }
  });

  it('hands a key on in one transaction: an outside contender never gets in between', async () => {
    const key = uniqueKey('handoff');
    const outsider = new PostgresLeaseStore({
      connectionString: PG_URL,
      schema,
      maxConnections: 1,
    });
    const req = (ownerId: string) => ({
      key,
      leaseId: randomUUID(),
      ownerId,
      ttlMs: 10_000,
      value: undefined,
    });
    try {
      let holder = req('chain');
      const first = await store.tryAcquire(holder, OPTS());
      assert.equal(first.status, 'acquired');
      let token = first.status === 'acquired' ? first.token : 0n;
      let stop = false;
      const outsiderAnswers: string[] = [];
      const contender = (async () => {
        while (!stop && outsiderAnswers.length < 2_000) {
          const r = await outsider.tryAcquire(req('outsider'), OPTS());
          outsiderAnswers.push(r.status);
          if (r.status === 'acquired') return;
        }
      })();
      for (let i = 0; i < 40; i++) {
        const next = req('chain');
        const h = await store.releaseAndAcquire(
          { key, leaseId: holder.leaseId, token },
          next,
          OPTS(),
        );
        assert.equal(h.released, 'released');
        assert.equal(h.acquired.status, 'acquired', `hand-off ${i}`);
        const t = h.acquired.status === 'acquired' ? h.acquired.token : 0n;
        assert.equal(t, token + 1n, 'each hand-off is the next grant: nobody else was granted');
        holder = next;
        token = t;
      }
      stop = true;
      await contender;
      assert.ok(outsiderAnswers.length > 0);
      assert.ok(
        outsiderAnswers.every((a) => a === 'busy'),
        `the outsider got ${outsiderAnswers.find((a) => a !== 'busy')}`,
      );
    } finally {
      await outsider.close();
    }
  });

  it('wakes watchers again after the LISTEN session is killed, and keeps delivering releases', async () => {
    const key = uniqueKey('relisten');
    let wakes = 0;
    const unwatch = await store.watch(key, () => wakes++);
    try {
      const pid = await eventually('the listener backend', async () => {
        const r = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE application_name = 'leasehold-listener' AND query LIKE $1`,
          [`LISTEN %${await channelOf(admin, schema)}%`],
        );
        return r.rows[0]?.pid;
      });
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      // Nothing was released: the only reason to wake is the re-established session.
      await eventually('the watcher to be woken after reconnect', () =>
        wakes >= 1 ? true : undefined,
      );
      const after = wakes;
      const c = new LeaseClient({ store, ownerId: 'a' });
      const r = await c.acquire(key, { ttl: 5000 });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') await r.lease.release();
      await eventually('the release to reach the re-established session', () =>
        wakes > after ? true : undefined,
      );
      await c.close();
    } finally {
      unwatch();
    }
  });

  it("works over the application's own pg.Pool, wakes waiters from its settings, and leaves the pool open on close", async () => {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    pool.on('error', () => undefined);
    const own = new PostgresLeaseStore({ pool, schema });
    try {
      const a = new LeaseClient({ store: own, ownerId: 'pool-a' });
      const b = new LeaseClient({ store, ownerId: 'other-store' });
      const key = uniqueKey('userpool');
      const la = await b.acquire(key, { ttl: 30_000 });
      assert.equal(la.status, 'acquired');
      let woken = 0;
      const unwatch = await own.watch(key, () => woken++);
      if (la.status === 'acquired') await la.lease.release();
      await eventually('a wake-up on the pool-derived LISTEN session', () =>
        woken > 0 ? true : undefined,
      );
      unwatch();
      const r = await a.acquire(key, { ttl: 5000 });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') await r.lease.release();
      await a.close();
      await b.close();
    } finally {
      await own.close();
    }
    const alive = await pool.query<{ one: number }>('SELECT 1 AS one');
    assert.equal(alive.rows[0]!.one, 1, "closing the store must not end the application's pool");
    await pool.end();
  });

  it('fails unavailable, never busy, when the server cannot be reached', async () => {
    const dead = new PostgresLeaseStore({
      connectionString: 'postgres://postgres@127.0.0.1:1/test',
      schema,
      autoMigrate: false,
    });
    try {
      await assert.rejects(
        dead.tryAcquire(
          {
            key: uniqueKey('dead'),
            leaseId: randomUUID(),
            ownerId: 'a',
            ttlMs: 1000,
            value: undefined,
          },
          OPTS(),
        ),
        (err: unknown) => isLeaseholdError(err, 'ERR_UNAVAILABLE'),
      );
      const client = new LeaseClient({ store: dead, ownerId: 'a' });
      const r = await client.acquire(uniqueKey('dead'), { ttl: 1000 });
      assert.equal(r.status, 'unavailable');
      await client.close();
    } finally {
      await dead.close();
    }
  });
});

async function channelOf(admin: pg.Client, schema: string): Promise<string> {
  // The channel name is baked into the notify trigger's function; read it back from there.
  const r = await admin.query<{ src: string }>(
    `SELECT prosrc AS src FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = $1 AND p.proname = 'coordination_lease_notify'`,
    [schema],
  );
  const m = /leasehold_[0-9a-f]{32}/.exec(r.rows[0]?.src ?? '');
  assert.ok(m, 'notify function names its channel');
  return m[0];
}

describe('PostgresLeaseStore migrations and names', () => {
  it('applies each migration exactly once when eight processes start at once', async () => {
    const schema = uniqueSchema('migrate');
    try {
      const reports = await Promise.all(
        Array.from({ length: 8 }, () =>
          migratePostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 1 }),
        ),
      );
      const applied = reports.flatMap((r) => r.applied);
      assert.deepEqual(applied, [
        'coordination_lease/0001_lease.sql',
        'coordination_lease/0002_acquire_function.sql',
        'coordination_lease/0003_token_block.sql',
        'coordination_lease/0004_waiter_interest.sql',
        'coordination_lease/0005_grant_release_functions.sql',
        'coordination_lease/0006_notify_other_listeners.sql',
        'coordination_lease/0007_grant_update_first.sql',
        'coordination_lease/0008_incarnation.sql',
        'coordination_lease/0009_retention_floor.sql',
      ]);
      const again = await migratePostgresLeaseStore({ connectionString: PG_URL, schema });
      assert.deepEqual(again.applied, [], 'a second run applies nothing');
      const rows = await withPgClient((c) =>
        c.query(`SELECT name FROM ${quoteIdent(schema)}.leasehold_migrations`),
      );
      assert.equal(rows.rowCount, 9);
    } finally {
      await dropSchema(schema);
    }
  });

  it('escapes schema and table names that contain quotes, spaces and SQL', async () => {
    const schema = `${uniqueSchema('names')} "q"; --`;
    const tableName = `lease "t" ; drop table x`;
    const stores = [0, 1].map(
      () =>
        new PostgresLeaseStore({
          connectionString: PG_URL,
          schema,
          table: tableName,
          maxConnections: 2,
        }),
    );
    try {
      const [a, b] = stores.map((s, i) => new LeaseClient({ store: s, ownerId: `o${i}` }));
      const key = `it's; a "key" -- with \\ backslash %_ $1 $$x$$ E'\\'`;
      const la = await a!.acquire(key, { ttl: 10_000, value: "v'al\\ue" });
      assert.equal(la.status, 'acquired');
      const busy = await b!.acquire(key, { ttl: 1000 });
      assert.equal(busy.status, 'busy');
      if (busy.status === 'busy') {
        assert.equal(busy.holder.ownerId, 'o0');
        assert.equal(busy.holder.value, "v'al\\ue");
      }
      assert.deepEqual(
        (await b!.list("it's")).map((x) => x.key),
        [key],
      );
      // The release NOTIFY travels on the channel of this oddly named table.
      let woken = 0;
      const unwatch = await stores[1]!.watch(key, () => woken++);
      if (la.status === 'acquired') await la.lease.release();
      await eventually('the release notification', () => (woken > 0 ? true : undefined));
      unwatch();
      const lb = await b!.acquire(key, { ttl: 1000 });
      assert.equal(lb.status, 'acquired');
      if (lb.status === 'acquired') await lb.lease.release();
      await a!.close();
      await b!.close();
    } finally {
      await Promise.all(stores.map((s) => s.close()));
      await withPgClient((c) => c.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`));
    }
  });

  it('refuses identifiers it cannot represent', () => {
    for (const [field, opts] of [
      ['schema', { schema: '' }],
      ['schema', { schema: 'a\u0000b' }],
      ['table', { table: 'x'.repeat(49) }],
      ['pool', { connectionString: PG_URL, pool: {} }],
    ] as const) {
      assert.throws(
        () => new PostgresLeaseStore({ connectionString: PG_URL, ...opts } as never),
        (err: unknown) =>
          isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && err.message.startsWith(field),
      );
    }
  });
});
