import { HttpLeaseStore } from '../../../src/stores/http/store.js';
import { startTestServer, type TestServer } from '../../support/lease-server.js';
import type { StoreHarness } from '../harness.js';

/**
 * The contract through `leasehold/http` against a live server (started in this process on a
 * free port) over a temporary SQLite file. Each `open()` is a new HTTP client of that server.
 */
export function httpSqliteHarness(): StoreHarness {
  let server: Promise<TestServer> | undefined;
  return {
    name: 'http-sqlite',
    async open() {
      server ??= startTestServer();
      const { url } = await server;
      return HttpLeaseStore.connect({ url });
    },
    async teardown() {
      if (server !== undefined) await (await server).close();
    },
  };
}
