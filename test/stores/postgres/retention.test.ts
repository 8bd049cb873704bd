import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { prunePostgres } from '../../../src/stores/postgres/retention.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import {
  runRetentionScenario,
  RETENTION_KEYS,
  type RetentionSubject,
} from '../../support/retention-scenario.js';

const schemas: string[] = [];
let pool: pg.Pool;
before(() => {
  pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
});
after(async () => {
  for (const s of schemas) await dropSchema(s);
  await pool.end();
});

async function scenario(raiseFloor: boolean) {
  const schema = uniqueSchema('retention');
  schemas.push(schema);
  const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
  await store.migrate();
  const lease = `${quoteIdent(schema)}.coordination_lease`;
  const subject: RetentionSubject = {
    store,
    seedReleased: async (keys, tokenOf) => {
      for (let i = 0; i < keys.length; i += 10_000) {
        const part = keys.slice(i, i + 10_000);
        await pool.query(
          `INSERT INTO ${lease} (resource_key, fencing_token)
           SELECT k, t::bigint FROM unnest($1::text[], $2::text[]) AS u(k, t)`,
          [part, part.map((_, j) => tokenOf(i + j).toString())],
        );
      }
    },
    prune: () => prunePostgres({ connectionString: PG_URL, schema, olderThanMs: 0 }, raiseFloor),
    records: async () =>
      (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${lease}`)).rows[0]!.n,
  };
  try {
    return await runRetentionScenario(subject, 'ret/');
  } finally {
    await store.close();
  }
}

describe(`PostgreSQL retention (${RETENTION_KEYS} released keys)`, () => {
  it('deletes released rows, keeps held ones, and every later first grant is above every earlier token', async () => {
    const out = await scenario(true);
    assert.deepEqual(out.violations, []);
    assert.equal(out.deleted, RETENTION_KEYS + 50);
    assert.ok(out.recordsAfter <= Math.ceil(out.liveRows * 1.1), `${out.recordsAfter} rows left`);
  });

  it('a prune that forgets to raise the floor is caught (planted bug)', async () => {
    const out = await scenario(false);
    assert.ok(out.violations.length > 0, 'the scenario must notice reused tokens');
  });
});
