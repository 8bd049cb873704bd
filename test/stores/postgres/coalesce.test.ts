import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { leaseIdPrefix } from '../../../src/core/ids.js';
import type { StoreAcquireResult, StoreRequestOptions } from '../../../src/core/store.js';
import { quoteIdent, type PgPool } from '../../../src/drivers/postgres/client.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { elapse, eventually } from '../../support/time.js';

// Decision 017: requests of one store that meet go out in shared statements. These tests
// count the statements on a real pg.Pool (wrapped only to count what it is asked) and check
// that every request still gets its own answer.

const OPTS = (timeoutMs = 10_000): StoreRequestOptions => ({
  timeoutMs,
  signal: new AbortController().signal,
});

/** A real pool that counts the lease statements it is asked to run. */
function countingPool(pool: pg.Pool): PgPool & { grants: number; releases: number } {
  const counted = {
    grants: 0,
    releases: 0,
    options: pool.options,
    query: (text: string) => {
      // A batch names the grant function, a lone grant its wrapper (migration 0005).
      if (/_acquire\(|_acquire"\(|_grant"\(/.test(text)) counted.grants++;
      if (text.includes("lease_until = '-infinity'") || text.includes('_release"(')) {
        counted.releases++;
      }
      return pool.query(text);
    },
    connect: () => pool.connect(),
    end: () => pool.end(),
  };
  return counted;
}

function ask(key: string, leaseId = randomUUID(), ownerId = 'o') {
  return { key, leaseId, ownerId, ttlMs: 60_000, value: `v-${leaseId.slice(0, 4)}` };
}

function tokenOf(r: StoreAcquireResult): bigint {
  assert.equal(
    r.status,
    'acquired',
    JSON.stringify(r, (_k, v: unknown) => String(v)),
  );
  return (r as { token: bigint }).token;
}

describe('PostgresLeaseStore coalescing (decision 017)', () => {
  const schema = uniqueSchema('coalesce');
  const table = `${quoteIdent(schema)}.coordination_lease`;
  let pool: pg.Pool;
  let counted: ReturnType<typeof countingPool>;
  let store: PostgresLeaseStore;
  let admin: pg.Client;

  before(async () => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 8 });
    pool.on('error', () => undefined);
    counted = countingPool(pool);
    store = new PostgresLeaseStore({ pool: counted, schema });
    await store.migrate();
    admin = new pg.Client({ connectionString: PG_URL });
    admin.on('error', () => undefined);
    await admin.connect();
  });
  after(async () => {
    await store?.close();
    await admin?.end();
    await pool?.end();
    await dropSchema(schema);
  });

  it('grants and releases many keys asked for together in shared statements, each with its own answer', async () => {
    const asks = Array.from({ length: 40 }, (_, i) => ask(uniqueKey(`many-${i}`)));
    const grants0 = counted.grants;
    const granted = await Promise.all(asks.map((a) => store.tryAcquire(a, OPTS())));
    const grantStatements = counted.grants - grants0;
    assert.ok(grantStatements < 40, `40 grants in ${grantStatements} statements`);
    for (const r of granted) assert.equal(tokenOf(r), 1n, 'every new key starts at token 1');

    // Each holder is its own request's lease, with its own value.
    const rows = await admin.query<{ k: string; owner: string; value: string }>(
      `SELECT resource_key AS k, owner_id::text AS owner, value FROM ${table} WHERE resource_key = ANY($1)`,
      [asks.map((a) => a.key)],
    );
    const byKey = new Map(rows.rows.map((r) => [r.k, r]));
    for (const a of asks) {
      assert.equal(byKey.get(a.key)?.owner, a.leaseId);
      assert.equal(byKey.get(a.key)?.value, a.value);
    }

    // Half released with the right token, half with a wrong one: answers are per request.
    const releases0 = counted.releases;
    const released = await Promise.all(
      asks.map((a, i) =>
        store.release({ key: a.key, leaseId: a.leaseId, token: i % 2 === 0 ? 1n : 2n }, OPTS()),
      ),
    );
    assert.ok(counted.releases - releases0 < 40, `40 releases in ${counted.releases - releases0}`);
    released.forEach((r, i) => assert.equal(r.status, i % 2 === 0 ? 'released' : 'not_owner'));
    const again = await Promise.all(asks.map((a) => store.tryAcquire(ask(a.key), OPTS())));
    again.forEach((r, i) => {
      if (i % 2 === 0) assert.equal(tokenOf(r), 2n, 'a released key goes on with the next token');
      else assert.equal(r.status, 'busy', 'a key released with a wrong token is still held');
    });
  });

  it('answers tasks racing for one key from one statement: one grant, the rest busy with that holder', async () => {
    const key = uniqueKey('hot');
    const asks = Array.from({ length: 12 }, (_, i) => ask(key, randomUUID(), `task-${i}`));
    const grants0 = counted.grants;
    const answers = await Promise.all(asks.map((a) => store.tryAcquire(a, OPTS())));
    assert.ok(counted.grants - grants0 < 12, `12 asks in ${counted.grants - grants0} statements`);
    const winners = answers.flatMap((r, i) => (r.status === 'acquired' ? [i] : []));
    assert.equal(winners.length, 1, 'exactly one grant');
    const w = asks[winners[0]!]!;
    const token = tokenOf(answers[winners[0]!]!);
    for (const r of answers) {
      if (r.status === 'acquired') continue;
      assert.equal(r.status, 'busy');
      assert.equal(r.holder.token, token);
      assert.equal(r.holder.leaseIdPrefix, leaseIdPrefix(w.leaseId));
      assert.equal(r.holder.ownerId, w.ownerId);
      assert.equal(r.holder.value, w.value);
      assert.ok(r.retryAfterMs > 0);
    }
    // The holder's own re-ask, batched with contenders, is its grant again (idempotent).
    const more = await Promise.all([
      store.tryAcquire(ask(key), OPTS()),
      store.tryAcquire(w, OPTS()),
      store.tryAcquire(ask(key), OPTS()),
    ]);
    assert.equal(more[0].status, 'busy');
    assert.equal(tokenOf(more[1]), token);
    assert.equal(more[2].status, 'busy');
  });

  it('writes nothing for a batch of busy answers', async () => {
    const keys = Array.from({ length: 6 }, (_, i) => uniqueKey(`busy-${i}`));
    await Promise.all(keys.map((k) => store.tryAcquire(ask(k), OPTS())));
    const version = async () =>
      (
        await admin.query<{ v: string }>(
          `SELECT string_agg(xmin::text || '/' || xmax::text || '/' || ctid::text, ',' ORDER BY resource_key) AS v
           FROM ${table} WHERE resource_key = ANY($1)`,
          [keys],
        )
      ).rows[0]!.v;
    const before = await version();
    const answers = await Promise.all(
      [...keys, ...keys].map((k) => store.tryAcquire(ask(k), OPTS())),
    );
    for (const r of answers) assert.equal(r.status, 'busy');
    assert.equal(await version(), before, 'no row version or lock marker changed');
  });

  it("fails only the request whose key cannot grant; the batch's other requests are answered", async () => {
    const full = uniqueKey('exhausted');
    await admin.query(
      `INSERT INTO ${table} (resource_key, fencing_token) VALUES ($1, 9223372036854775807)`,
      [full],
    );
    const others = Array.from({ length: 5 }, (_, i) => ask(uniqueKey(`beside-${i}`)));
    const settled = await Promise.allSettled([
      ...others.map((a) => store.tryAcquire(a, OPTS())),
      store.tryAcquire(ask(full), OPTS()),
    ]);
    for (const s of settled.slice(0, 5)) {
      assert.equal(s.status, 'fulfilled');
      assert.equal(tokenOf(s.value), 1n);
    }
    const last = settled[5]!;
    assert.equal(last.status, 'rejected');
    const err = last.reason as unknown;
    assert.ok(isLeaseholdError(err, 'ERR_UNAVAILABLE'), String(err));
    assert.equal((err.cause as { code?: string }).code, '22003');
  });

  it('answers a request whose timeout passes while it waits for its statement without sending it', async () => {
    const locked = uniqueKey('locked');
    const queued = uniqueKey('queued');
    const first = await store.tryAcquire({ ...ask(locked), ttlMs: 100 }, OPTS());
    tokenOf(first);
    await elapse(200);
    const blocker = new pg.Client({ connectionString: PG_URL });
    blocker.on('error', () => undefined);
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM ${table} WHERE resource_key = $1 FOR UPDATE`, [locked]);
      // The grant of the expired key waits on the row lock and holds the grant slot…
      const stuck = store.tryAcquire(ask(locked), OPTS(20_000));
      await eventually('the grant to wait on the row lock', async () => {
        const r = await admin.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
          [`%${locked}%`],
        );
        return r.rows.length > 0 ? true : undefined;
      });
      // A request whose timeout is spent by the time its statement could go is answered
      // unavailable, unsent.
      const late = store.tryAcquire(ask(queued), OPTS(0));
      await assert.rejects(late, (err: unknown) => {
        assert.ok(isLeaseholdError(err, 'ERR_UNAVAILABLE'), String(err));
        assert.match((err as Error).message, /waited for its statement/);
        return true;
      });
      const row = await admin.query(`SELECT 1 FROM ${table} WHERE resource_key = $1`, [queued]);
      assert.equal(row.rows.length, 0, 'the expired request was never sent');
      // Other keys wait for the stuck grant's slot for STALLED_MS, not its whole timeout.
      const beside = await store.tryAcquire(ask(uniqueKey('beside-stuck')), OPTS());
      tokenOf(beside);
      await blocker.query('ROLLBACK');
      assert.equal(tokenOf(await stuck), 2n);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
    }
  });
});
