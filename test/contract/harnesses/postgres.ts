import { randomBytes } from 'node:crypto';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import type { StoreHarness } from '../harness.js';
import { PG_URL, dropSchema } from '../../support/postgres.js';

/**
 * A fresh schema per harness (so parallel runs and other helpers on the shared server never
 * meet), dropped in teardown. Each `open()` is a new store with its own small pool.
 */
export function postgresHarness(): StoreHarness {
  const schema = `lh_contract_${process.pid}_${randomBytes(4).toString('hex')}`;
  return {
    name: 'postgres',
    open: async () => {
      const store = new PostgresLeaseStore({
        connectionString: PG_URL,
        schema,
        maxConnections: 4,
      });
      // Fail at once, not in the middle of a case, when the server cannot be reached.
      await store.migrate();
      return store;
    },
    teardown: () => dropSchema(schema),
  };
}
