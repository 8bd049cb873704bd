import pg from 'pg';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { outcomeOf } from './outcome.js';

/**
 * PostgresFence without lease validation, in a schema of its own: each instance its own
 * fence (own pool); the data a table in the same schema, written in the fence's transaction.
 */
export function postgresFenceHarness(): FenceHarness {
  const schema = uniqueSchema('fence_contract');
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
    })());
  return {
    name: 'postgres (PostgresFence, no lease validation)',
    async open(policy) {
      await prepare();
      const fence = new PostgresFence({ connectionString: PG_URL, schema, policy });
      await fence.migrate();
      const reader = new pg.Client({ connectionString: PG_URL });
      reader.on('error', () => undefined);
      await reader.connect();
      return {
        write: async (scope, token, value, o) =>
          outcomeOf(
            await fence.write(
              {
                scope,
                token,
                ...(o?.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey }),
              },
              (tx) =>
                tx.query(`INSERT INTO "${schema}".fenced_data (scope, value) VALUES ($1, $2)`, [
                  scope,
                  value,
                ]),
            ),
          ),
        claim: (scope, token) => fence.claim(scope, token),
        accepted: async (scope) =>
          (
            await reader.query<{ value: string }>(
              `SELECT value FROM "${schema}".fenced_data WHERE scope = $1 ORDER BY seq`,
              [scope],
            )
          ).rows.map((r) => r.value),
        close: async () => {
          await fence.close();
          await reader.end();
        },
      };
    },
    teardown: () => dropSchema(schema),
  };
}
