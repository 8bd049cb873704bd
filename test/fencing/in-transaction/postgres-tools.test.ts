import { after, before, describe } from 'node:test';
import { pgSchema, text, bigint } from 'drizzle-orm/pg-core';
import { drizzle } from 'drizzle-orm/node-postgres';
import knexFactory, { type Knex } from 'knex';
import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import type { FenceResult } from '../../../src/core/results.js';
import {
  drizzleQuery,
  fenceIn,
  knexQuery,
  kyselyQuery,
  pgQuery,
} from '../../../src/fencing/in-transaction/index.js';
import { PG_URL } from '../../support/postgres.js';
import { ReportDomain, RollBack, testPool, toolCases, type WriteReport } from './domain.js';

/**
 * The fence inside the user's own transaction, written as each tool's user would: the domain
 * write and `fenceIn` in one transaction, rolled back unless the fence answered `applied`.
 * These are the TypeScript examples of docs/postgres.md ("Fence inside your own transaction").
 */

/** Runs `body` in a transaction of the tool; a RollBack thrown inside comes out as its result. */
async function settle(run: () => Promise<FenceResult<undefined>>): Promise<FenceResult<undefined>> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof RollBack) return err.result;
    throw err;
  }
}

/** After the domain write: keep it only with `applied` (and not asked to roll back). */
function keepOrRollBack(r: FenceResult<undefined>, rollBack: boolean | undefined): void {
  if (r.status !== 'applied' || rollBack === true) throw new RollBack(r);
}

describe('fenceIn with a raw pg client', () => {
  const domain = new ReportDomain();
  let pool: pg.Pool;
  before(async () => {
    await domain.setUp();
    pool = testPool();
  });
  after(async () => {
    await pool.end();
    await domain.tearDown();
  });

  const write: WriteReport = async (scope, token, body, o = {}) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO "${domain.schema}".report (id, body, token) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token`,
        [scope, body, token.toString()],
      );
      const r = await fenceIn(
        pgQuery(client),
        { scope, token, idempotencyKey: o.idempotencyKey },
        { schema: domain.schema },
      );
      await client.query(r.status === 'applied' && o.rollBack !== true ? 'COMMIT' : 'ROLLBACK');
      return r;
    } finally {
      client.release();
    }
  };
  toolCases(domain, () => write);
});

describe('fenceIn with a Kysely transaction', () => {
  const domain = new ReportDomain();
  interface Db {
    report: { id: string; body: string; token: string };
  }
  let db: Kysely<Db>;
  before(async () => {
    await domain.setUp();
    db = new Kysely<Db>({ dialect: new PostgresDialect({ pool: testPool() }) });
  });
  after(async () => {
    await db.destroy();
    await domain.tearDown();
  });

  const write: WriteReport = (scope, token, body, o = {}) =>
    settle(() =>
      db.transaction().execute(async (trx) => {
        await trx
          .withSchema(domain.schema)
          .insertInto('report')
          .values({ id: scope, body, token: token.toString() })
          .onConflict((c) => c.column('id').doUpdateSet({ body, token: token.toString() }))
          .execute();
        const r = await fenceIn(
          kyselyQuery(trx),
          { scope, token, idempotencyKey: o.idempotencyKey },
          { schema: domain.schema },
        );
        keepOrRollBack(r, o.rollBack);
        return r;
      }),
    );
  toolCases(domain, () => write);
});

describe('fenceIn with a Drizzle transaction (node-postgres)', () => {
  const domain = new ReportDomain();
  const report = pgSchema(domain.schema).table('report', {
    id: text('id').primaryKey(),
    body: text('body').notNull(),
    token: bigint('token', { mode: 'bigint' }).notNull(),
  });
  let pool: pg.Pool;
  let db: ReturnType<typeof drizzle>;
  before(async () => {
    await domain.setUp();
    pool = testPool();
    db = drizzle(pool);
  });
  after(async () => {
    await pool.end();
    await domain.tearDown();
  });

  const write: WriteReport = (scope, token, body, o = {}) =>
    settle(() =>
      db.transaction(async (tx) => {
        await tx
          .insert(report)
          .values({ id: scope, body, token })
          .onConflictDoUpdate({ target: report.id, set: { body, token } });
        const r = await fenceIn(
          drizzleQuery(tx),
          { scope, token, idempotencyKey: o.idempotencyKey },
          { schema: domain.schema },
        );
        keepOrRollBack(r, o.rollBack);
        return r;
      }),
    );
  toolCases(domain, () => write);
});

describe('fenceIn with a Knex transaction', () => {
  const domain = new ReportDomain();
  let knex: Knex;
  before(async () => {
    await domain.setUp();
    knex = knexFactory({ client: 'pg', connection: PG_URL, pool: { min: 0, max: 2 } });
  });
  after(async () => {
    await knex.destroy();
    await domain.tearDown();
  });

  const write: WriteReport = (scope, token, body, o = {}) =>
    settle(() =>
      knex.transaction(async (trx) => {
        await trx
          .withSchema(domain.schema)
          .table('report')
          .insert({ id: scope, body, token: token.toString() })
          .onConflict('id')
          .merge();
        const r = await fenceIn(
          knexQuery(trx),
          { scope, token, idempotencyKey: o.idempotencyKey },
          { schema: domain.schema },
        );
        keepOrRollBack(r, o.rollBack);
        return r;
      }),
    );
  toolCases(domain, () => write);
});
