import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { StoreAcquireRequest, StoreRequestOptions } from '../../../src/core/store.js';
import { LIMITS } from '../../../src/core/validate.js';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import { advancePostgresFencingEpoch } from '../../../src/stores/postgres/epoch.js';
import { runMigrations } from '../../../src/drivers/postgres/migrate.js';
import { leaseMigrations } from '../../../src/stores/postgres/migrate.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';

const OPTS = (): StoreRequestOptions => ({
  timeoutMs: 5000,
  signal: new AbortController().signal,
});
const request = (key: string, tokenBlock?: number): StoreAcquireRequest => ({
  key,
  leaseId: randomUUID(),
  ownerId: 'o',
  ttlMs: 60_000,
  value: undefined,
  ...(tokenBlock === undefined ? {} : { tokenBlock }),
});
const tokenOf = (r: { status: string; token?: bigint }): bigint => {
  assert.equal(r.status, 'acquired');
  return r.token!;
};

// The seed's acquire (000_239fd4fe4243a931.txt §4), literally; search_path points at the schema.
const SEED_ACQUIRE = `
INSERT INTO coordination_lease
(resource_key, owner_id, lease_until, fencing_token)
VALUES
($1, $2, clock_timestamp() + $3::interval, 1)
ON CONFLICT (resource_key) DO UPDATE
SET owner_id = EXCLUDED.owner_id,
lease_until = clock_timestamp() + $3::interval,
fencing_token = coordination_lease.fencing_token + 1
WHERE coordination_lease.lease_until <= clock_timestamp()
RETURNING fencing_token, lease_until;`;

/** The previous version's grant call (five parameters), as a client not yet upgraded sends it. */
const OLD_ACQUIRE = `SELECT status, token FROM coordination_lease_acquire($1, $2::uuid, $3::bigint, $4, $5)`;

interface Row {
  fencing_token: string;
  fencing_token_block: number | null;
  owner_id: string | null;
}

describe('PostgresLeaseStore token blocks', () => {
  let schema: string;
  let raw: pg.Client;
  const rowOf = async (key: string): Promise<Row | undefined> =>
    (
      await raw.query<Row>(
        'SELECT fencing_token::text, fencing_token_block, owner_id::text FROM coordination_lease WHERE resource_key = $1',
        [key],
      )
    ).rows[0];

  before(async () => {
    schema = uniqueSchema('block');
    // A table made by the previous version: migrations 0001 and 0002 only.
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      const old = await runMigrations(
        pool,
        schema,
        leaseMigrations(schema, 'coordination_lease').slice(0, 2),
      );
      assert.deepEqual(old.applied, [
        'coordination_lease/0001_lease.sql',
        'coordination_lease/0002_acquire_function.sql',
      ]);
    } finally {
      await pool.end();
    }
    raw = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${schema}` });
    raw.on('error', () => undefined);
    await raw.connect();
  });
  after(async () => {
    await raw?.end();
    await dropSchema(schema);
  });

  it('migrates a table of the previous version without rewriting its rows, and tokens keep increasing past a block', async () => {
    // Rows granted by the previous version's function, one still held.
    const held = randomUUID();
    const grant = (key: string, lease = randomUUID()) =>
      raw.query<{ status: string; token: string }>(OLD_ACQUIRE, [key, lease, 60_000, 'old', null]);
    assert.equal((await grant('k', held)).rows[0]?.token, '1');
    await raw.query(
      "UPDATE coordination_lease SET fencing_token = 40, owner_id = NULL, lease_until = '-infinity' WHERE resource_key = 'k'",
    );
    assert.equal((await grant('k', held)).rows[0]?.token, '41');
    const fileNode = async (): Promise<string> =>
      (
        await raw.query<{ f: string }>(
          "SELECT pg_relation_filenode('coordination_lease')::text AS f",
        )
      ).rows[0]!.f;
    const nodeBefore = await fileNode();

    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    try {
      assert.deepEqual((await store.migrate()).applied, [
        'coordination_lease/0003_token_block.sql',
        'coordination_lease/0004_waiter_interest.sql',
        'coordination_lease/0005_grant_release_functions.sql',
        'coordination_lease/0006_notify_other_listeners.sql',
        'coordination_lease/0007_grant_update_first.sql',
        'coordination_lease/0008_incarnation.sql',
        'coordination_lease/0009_retention_floor.sql',
      ]);
      assert.equal(await fileNode(), nodeBefore, 'the table was not rewritten');
      assert.deepEqual(await rowOf('k'), {
        fencing_token: '41',
        fencing_token_block: null,
        owner_id: held,
      });
      // The old holder's lease is still the store's: renew and release compare its token.
      const ref = { key: 'k', leaseId: held, token: 41n };
      assert.equal((await store.renew({ ...ref, ttlMs: 60_000 }, OPTS())).status, 'renewed');
      assert.equal((await store.inspect('k', OPTS())).lastToken, 41n, 'NULL block = the token');
      assert.equal((await store.release(ref, OPTS())).status, 'released');

      const blocked = request('k', 8);
      assert.equal(tokenOf(await store.tryAcquire(blocked, OPTS())), 42n);
      assert.equal((await store.inspect('k', OPTS())).lastToken, 49n);
      assert.equal((await rowOf('k'))?.fencing_token_block, 8);
      await store.release({ key: 'k', leaseId: blocked.leaseId, token: 42n }, OPTS());

      // A client not yet upgraded still calls the five-parameter function: it grants past the block.
      const oldLease = randomUUID();
      assert.deepEqual((await grant('k', oldLease)).rows[0], { status: 'acquired', token: '50' });
      assert.equal((await rowOf('k'))?.fencing_token_block, null);
      await store.release({ key: 'k', leaseId: oldLease, token: 50n }, OPTS());
      const next = request('k', 2);
      assert.equal(tokenOf(await store.tryAcquire(next, OPTS())), 51n);
      await store.release({ key: 'k', leaseId: next.leaseId, token: 51n }, OPTS());
      // The old function on a key it never saw: a block of one, as before.
      const fresh = uniqueKey('fresh');
      assert.equal((await grant(fresh)).rows[0]?.token, '1');
    } finally {
      await store.close();
    }
  });

  it("lifts the seed's literal upsert above a reserved block, and its RETURNING reports the lifted token", async () => {
    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    try {
      const key = uniqueKey('seed');
      const first = request(key, 5);
      const t = tokenOf(await store.tryAcquire(first, OPTS()));
      // Busy while held: the seed's upsert grants nothing.
      const seedLease = randomUUID();
      assert.equal((await raw.query(SEED_ACQUIRE, [key, seedLease, '1 minute'])).rowCount, 0);
      await store.release({ key, leaseId: first.leaseId, token: t }, OPTS());
      const seed = await raw.query<{ fencing_token: string }>(SEED_ACQUIRE, [
        key,
        seedLease,
        '1 minute',
      ]);
      assert.equal(seed.rows[0]?.fencing_token, String(t + 5n), 'above t … t + 4');
      assert.deepEqual(await rowOf(key), {
        fencing_token: String(t + 5n),
        fencing_token_block: null,
        owner_id: seedLease,
      });
      const state = await store.inspect(key, OPTS());
      assert.equal(state.holder?.token, t + 5n);
      assert.equal(state.lastToken, t + 5n);
      // The seed's own renew and release of that lease match the lifted token.
      await raw.query(
        "UPDATE coordination_lease SET owner_id = NULL, lease_until = '-infinity' WHERE resource_key = $1 AND owner_id = $2 AND fencing_token = $3",
        [key, seedLease, seed.rows[0].fencing_token],
      );
      assert.equal(tokenOf(await store.tryAcquire(request(key), OPTS())), t + 6n);
    } finally {
      await store.close();
    }
  });

  it("refuses a block that would end above int64's maximum without changing the row, alone or in a hand-off", async () => {
    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    try {
      const key = uniqueKey('edge');
      const max = LIMITS.maxToken;
      await raw.query(
        'INSERT INTO coordination_lease (resource_key, fencing_token, fencing_token_block) VALUES ($1, $2, 2)',
        [key, String(max - 10n)], // top = max − 9: room for 9 more tokens
      );
      const before = await rowOf(key);
      await assert.rejects(
        store.tryAcquire(request(key, 10), OPTS()),
        (e: unknown) => isLeaseholdError(e, 'ERR_UNAVAILABLE') && /exhausted/.test(e.message),
      );
      assert.deepEqual(await rowOf(key), before, 'nothing written');
      const last = request(key, 9);
      assert.equal(tokenOf(await store.tryAcquire(last, OPTS())), max - 8n);
      assert.equal((await store.inspect(key, OPTS())).lastToken, max, 'the top is the maximum');
      const ref = { key, leaseId: last.leaseId, token: max - 8n };
      const held = await rowOf(key);
      // The hand-off's release and grant are one transaction: the refused grant undoes the release.
      await assert.rejects(store.releaseAndAcquire(ref, request(key), OPTS()), /exhausted/);
      assert.deepEqual(await rowOf(key), held, 'the release was rolled back with it');
      assert.equal((await store.release(ref, OPTS())).status, 'released');
      await assert.rejects(store.tryAcquire(request(key), OPTS()), /exhausted/);
      assert.equal((await rowOf(key))?.fencing_token, String(max - 8n));
    } finally {
      await store.close();
    }
  });

  it('refuses a token block outside 1..64 with ERR_INVALID_ARGUMENT, at the client and in SQL', async () => {
    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    try {
      for (const tokenBlock of [0, 65, 2.5]) {
        await assert.rejects(
          store.tryAcquire(request('bad', tokenBlock), OPTS()),
          (e: unknown) =>
            isLeaseholdError(e, 'ERR_INVALID_ARGUMENT') && /tokenBlock/.test(e.message),
        );
      }
      await assert.rejects(
        raw.query('SELECT * FROM coordination_lease_acquire($1, $2::uuid, 1000, $3, NULL, 65)', [
          'bad',
          randomUUID(),
          'o',
        ]),
        /p_block must be from 1 to 64/,
      );
      assert.equal(await rowOf('bad'), undefined);
    } finally {
      await store.close();
    }
  });
});

describe('fencing epoch with token blocks', () => {
  it('puts the floor above a reserved block, not only above the granted token; a first grant after it keeps its block', async () => {
    const schema = uniqueSchema('blockepoch');
    const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    try {
      await store.migrate();
      const key = uniqueKey('hot');
      const lease = `${quoteIdent(schema)}.coordination_lease`;
      // A counter above the clock floor (as after heavy use), then a grant reserving 8 tokens.
      const high = 2n ** 62n;
      await store.tryAcquire(request(key), OPTS()); // creates the row
      const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
      await pool.query(
        `UPDATE ${lease} SET fencing_token = $1, owner_id = NULL, lease_until = '-infinity' WHERE resource_key = $2`,
        [String(high), key],
      );
      const blocked = request(key, 8);
      const t = tokenOf(await store.tryAcquire(blocked, OPTS()));
      assert.equal(t, high + 1n);
      const epoch = await advancePostgresFencingEpoch({ connectionString: PG_URL, schema });
      assert.equal(epoch.floor, t + 7n, 'the floor is the top of the block');
      const rows = await pool.query<{ fencing_token: string; fencing_token_block: number | null }>(
        `SELECT fencing_token::text, fencing_token_block FROM ${lease} WHERE resource_key = $1`,
        [key],
      );
      assert.deepEqual(rows.rows[0], { fencing_token: String(t + 7n), fencing_token_block: null });
      // The pre-epoch lease is void, and the next grant is above every reserved token.
      assert.equal(
        (await store.renew({ key, leaseId: blocked.leaseId, token: t, ttlMs: 1000 }, OPTS()))
          .status,
        'lost',
      );
      assert.equal(tokenOf(await store.tryAcquire(request(key), OPTS())), t + 8n);
      // A key created after the epoch: its first token is raised to floor + 1 by the epoch's
      // trigger, and its block moves up with it.
      const fresh = uniqueKey('fresh');
      const f = tokenOf(await store.tryAcquire(request(fresh, 4), OPTS()));
      assert.equal(f, epoch.floor + 1n);
      assert.equal((await store.inspect(fresh, OPTS())).lastToken, f + 3n);
      await pool.end();
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  it('advances the epoch of a table restored from before the block migration, which then migrates', async () => {
    const schema = uniqueSchema('oldepoch');
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      await runMigrations(pool, schema, leaseMigrations(schema, 'coordination_lease').slice(0, 2));
      const lease = `${quoteIdent(schema)}.coordination_lease`;
      await pool.query(`INSERT INTO ${lease} (resource_key, fencing_token) VALUES ('k', $1)`, [
        String(2n ** 62n),
      ]);
      const epoch = await advancePostgresFencingEpoch({ connectionString: PG_URL, schema });
      assert.equal(epoch.floor, 2n ** 62n);
      const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
      try {
        const t = tokenOf(await store.tryAcquire(request('k', 3), OPTS()));
        assert.equal(t, 2n ** 62n + 1n);
        const f = tokenOf(await store.tryAcquire(request('new', 3), OPTS()));
        assert.equal(f, 2n ** 62n + 1n, 'the old epoch trigger raises a new key, block and all');
        assert.equal((await store.inspect('new', OPTS())).lastToken, f + 2n);
      } finally {
        await store.close();
      }
    } finally {
      await pool.end();
      await dropSchema(schema);
    }
  });
});
