import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { FenceResult } from '../../../src/core/results.js';
import {
  claimIn,
  claimInSqlite,
  fenceIn,
  fenceInSqlite,
  pgQuery,
} from '../../../src/fencing/in-transaction/index.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';
import { outcomeOf } from './outcome.js';

// `leasehold/fencing/in-transaction` as fences: the decision taken in the caller's own
// transaction, the caller's insert in the same transaction, committed on `applied` and rolled
// back otherwise — as the functions' documentation tells a caller to.

/** Carries a refusal out of a better-sqlite3 transaction function, which rolls it back. */
class Refused extends Error {
  constructor(readonly result: FenceResult<undefined>) {
    super(result.status);
  }
}

/** fenceInSqlite / claimInSqlite in `db.transaction(fn).immediate()`, a connection per instance. */
export function inSqliteTransactionFenceHarness(): FenceHarness {
  const tmp = tempDir('fence-contract-in-sqlite');
  const path = join(tmp.dir, 'resource.db');
  return {
    name: 'in-transaction (fenceInSqlite in your better-sqlite3 transaction)',
    open(policy) {
      const db = new Database(path, { timeout: 5000 });
      db.pragma('journal_mode = WAL');
      db.exec(`CREATE TABLE IF NOT EXISTS fenced_data (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, value TEXT NOT NULL)`);
      const insert = db.prepare('INSERT INTO fenced_data (scope, value) VALUES (?, ?)');
      const select = db
        .prepare('SELECT value FROM fenced_data WHERE scope = ? ORDER BY seq')
        .pluck();
      const write = db.transaction(
        (scope: string, token: bigint | string, value: string, key: string | undefined) => {
          const r = fenceInSqlite(
            db,
            { scope, token, ...(key === undefined ? {} : { idempotencyKey: key }) },
            { policy },
          );
          if (r.status !== 'applied') throw new Refused(r);
          insert.run(scope, value);
          return r;
        },
      );
      const claim = db.transaction((scope: string, token: bigint | string) =>
        claimInSqlite(db, scope, token, { policy }),
      );
      return {
        // Async: a thrown error (a malformed token) becomes the rejection.
        async write(scope, token, value, o) {
          await Promise.resolve();
          try {
            return outcomeOf(write.immediate(scope, token, value, o?.idempotencyKey));
          } catch (err) {
            if (err instanceof Refused) return outcomeOf(err.result);
            throw err;
          }
        },
        claim: (scope, token) => claim.immediate(scope, token),
        accepted: (scope) => Promise.resolve(select.all(scope) as string[]),
        close: () => {
          db.close();
        },
      };
    },
    teardown: () => tmp.remove(),
  };
}

/** fenceIn / claimIn with a pg client in your own transaction, a connection per instance. */
export function inPostgresTransactionFenceHarness(): FenceHarness {
  const schema = uniqueSchema('claims_fc_in_tx');
  let ready: Promise<void> | undefined;
  const prepare = () =>
    (ready ??= (async () => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try {
        await c.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
        await c.query(
          `CREATE TABLE IF NOT EXISTS "${schema}".fenced_data (seq bigserial PRIMARY KEY, scope text NOT NULL, value text NOT NULL)`,
        );
      } finally {
        await c.end();
      }
      // The functions fenceIn calls come with PostgresFence's migrations.
      const fence = new PostgresFence({ connectionString: PG_URL, schema });
      await fence.migrate();
      await fence.close();
    })());
  return {
    name: 'in-transaction (fenceIn in your PostgreSQL transaction)',
    async open(policy) {
      await prepare();
      const client = new pg.Client({ connectionString: PG_URL });
      client.on('error', () => undefined);
      await client.connect();
      const query = pgQuery(client);
      // One transaction at a time on this connection, as a caller's own code would have.
      let turn: Promise<unknown> = Promise.resolve();
      const inTransaction = <T>(fn: () => Promise<{ commit: boolean; value: T }>): Promise<T> => {
        const run = turn.then(async () => {
          await client.query('BEGIN');
          try {
            const r = await fn();
            await client.query(r.commit ? 'COMMIT' : 'ROLLBACK');
            return r.value;
          } catch (err) {
            await client.query('ROLLBACK');
            throw err;
          }
        });
        turn = run.catch(() => undefined);
        return run;
      };
      return {
        write: (scope, token, value, o) =>
          inTransaction(async () => {
            const r = await fenceIn(
              query,
              {
                scope,
                token,
                ...(o?.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey }),
              },
              { schema, policy },
            );
            if (r.status === 'applied')
              await client.query(
                `INSERT INTO "${schema}".fenced_data (scope, value) VALUES ($1, $2)`,
                [scope, value],
              );
            return { commit: r.status === 'applied', value: outcomeOf(r) };
          }),
        claim: (scope, token) =>
          inTransaction(async () => {
            const r = await claimIn(query, scope, token, { schema, policy });
            return { commit: r.status === 'applied', value: r };
          }),
        accepted: (scope) =>
          inTransaction(async () => {
            const r = await client.query<{ value: string }>(
              `SELECT value FROM "${schema}".fenced_data WHERE scope = $1 ORDER BY seq`,
              [scope],
            );
            return { commit: true, value: r.rows.map((row) => row.value) };
          }),
        close: () => client.end(),
      };
    },
    teardown: () => dropSchema(schema),
  };
}
