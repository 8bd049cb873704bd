import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { HttpLeaseStore } from '../../../src/stores/http/store.js';
import { startTestServer, type TestServer } from '../../support/lease-server.js';
import { PG_URL, dropSchema, uniqueSchema } from '../../support/postgres.js';
import type { StoreHarness } from '../harness.js';

/**
 * The contract through `leasehold/http` against a live server (in this process, on a free
 * port) over PostgreSQL in a fresh schema of the shared server, dropped in teardown. Each
 * `open()` is a new HTTP client of that one server.
 */
export function httpPostgresHarness(): StoreHarness {
  const schema = uniqueSchema('httppg');
  let server: Promise<TestServer> | undefined;
  return {
    name: 'http-postgres',
    async open() {
      server ??= (async () => {
        const store = new PostgresLeaseStore({
          connectionString: PG_URL,
          schema,
          maxConnections: 8,
        });
        // Fail at once, not in the middle of a case, when the database cannot be reached.
        await store.migrate();
        return startTestServer({ store });
      })();
      const { url } = await server;
      return HttpLeaseStore.connect({ url });
    },
    async teardown() {
      try {
        if (server !== undefined) await (await server).close();
      } finally {
        await dropSchema(schema);
      }
    },
  };
}
