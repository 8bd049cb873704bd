import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import { claimCases, type ClaimSubject } from '../../support/claim-cases.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';

// PostgresFence.claim (claim before start, DESIGN §4, I9): the shared claim cases, durability
// across a new fence (new pool) on the same tables, and the migration of a fence table made
// before claims.

describe('PostgresFence.claim', () => {
  const schema = uniqueSchema('fence_claim');
  const q = quoteIdent(schema);
  let admin: pg.Client;
  const fences: PostgresFence[] = [];
  const byPolicy = new Map<'>=' | '>', PostgresFence>();

  const fenceFor = (policy: '>=' | '>'): PostgresFence => {
    let f = byPolicy.get(policy);
    if (f === undefined) {
      f = new PostgresFence({ connectionString: PG_URL, schema, policy, maxConnections: 8 });
      fences.push(f);
      byPolicy.set(policy, f);
    }
    return f;
  };

  const subject = (fence: PostgresFence): ClaimSubject => ({
    claim: (s, t) => fence.claim(s, t),
    write: async (s, t, body) =>
      (
        await fence.write({ scope: s, token: t }, (tx) =>
          tx.query(
            `INSERT INTO ${q}.report (id, body) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`,
            [s, body],
          ),
        )
      ).status,
    mark: (s) => fence.highWaterMark(s),
    data: async (s) =>
      (await admin.query<{ body: string }>(`SELECT body FROM ${q}.report WHERE id = $1`, [s]))
        .rows[0]?.body,
  });

  before(async () => {
    admin = new pg.Client({ connectionString: PG_URL });
    admin.on('error', () => undefined);
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${q}`);
    await admin.query(`CREATE TABLE ${q}.report (id text PRIMARY KEY, body text NOT NULL)`);
    await fenceFor('>=').migrate();
  });
  after(async () => {
    for (const f of fences) await f.close();
    await admin?.end();
    await dropSchema(schema);
  });

  claimCases(
    (policy) => subject(fenceFor(policy)),
    () => uniqueKey('report/july'),
  );

  it('a claim commits: a new fence with a new pool refuses 41, and under > still lets 42 write once', async () => {
    const s = uniqueKey('reopen');
    const a = new PostgresFence({ connectionString: PG_URL, schema, policy: '>' });
    assert.deepEqual(await a.claim(s, 42n), { status: 'applied' });
    await a.close();
    const b = new PostgresFence({ connectionString: PG_URL, schema, policy: '>' });
    fences.push(b);
    assert.equal(await b.highWaterMark(s), 42n);
    assert.equal((await b.write({ scope: s, token: 41n }, () => null)).status, 'stale_fence');
    assert.equal((await b.write({ scope: s, token: 42n }, () => null)).status, 'applied');
    assert.equal((await b.write({ scope: s, token: 42n }, () => null)).status, 'stale_fence');
  });

  it('migrates a fence table made before claims: marks kept, an old mark is no claim, claims work', async () => {
    const table = 'old_fence';
    const first = new PostgresFence({ connectionString: PG_URL, schema, table, policy: '>' });
    await first.migrate();
    await first.close();
    // Back to version 2: no claimed column, no record of migration 3, one mark at 9.
    await admin.query(`ALTER TABLE ${q}.${table} DROP COLUMN claimed`);
    await admin.query(`DELETE FROM ${q}.leasehold_migrations WHERE name = $1`, [
      `${table}/0003_claimed`,
    ]);
    await admin.query(`INSERT INTO ${q}.${table} (scope, high_water) VALUES ('s', 9)`);
    const fence = new PostgresFence({ connectionString: PG_URL, schema, table, policy: '>' });
    fences.push(fence);
    assert.deepEqual((await fence.migrate()).applied, [`${table}/0003_claimed`]);
    assert.equal(await fence.highWaterMark('s'), 9n);
    assert.equal((await fence.write({ scope: 's', token: 9n }, () => null)).status, 'stale_fence');
    assert.deepEqual(await fence.claim('s', 10n), { status: 'applied' });
    assert.equal((await fence.write({ scope: 's', token: 10n }, () => null)).status, 'applied');
  });

  it("is told to onDecision with op 'claim' (the mark when refused), and throws ERR_CLOSED once closed", async () => {
    const seen: unknown[] = [];
    const fence = new PostgresFence({
      connectionString: PG_URL,
      schema,
      onDecision: (d) => seen.push(d),
    });
    const s = uniqueKey('hook');
    assert.equal((await fence.claim(s, 3n)).status, 'applied');
    assert.equal((await fence.claim(s, 2n)).status, 'stale_fence');
    assert.deepEqual(seen, [
      { scope: s, token: 3n, status: 'applied', op: 'claim' },
      { scope: s, token: 2n, status: 'stale_fence', op: 'claim', highWaterMark: 3n },
    ]);
    await fence.close();
    await assert.rejects(fence.claim(s, 4n), { code: 'ERR_CLOSED' });
  });
});
