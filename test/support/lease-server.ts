import { join } from 'node:path';
import type { LeaseStore } from '../../src/core/store.js';
import type { AuthConfig } from '../../src/server/auth.js';
import { createLeaseServer, type LeaseServer } from '../../src/server/server.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { tempDir } from './tmp.js';

/** A leasehold server started in this process on a free loopback port. */
export interface TestServer {
  readonly url: string;
  readonly server: LeaseServer;
  readonly store: LeaseStore;
  readonly dbPath: string | undefined;
  close(): Promise<void>;
}

/** Starts a server over a fresh SQLite file in a temp dir (or over `store` when given). */
export async function startTestServer(
  options: { store?: LeaseStore; auth?: AuthConfig; bodyLimitBytes?: number } = {},
): Promise<TestServer> {
  const tmp = options.store === undefined ? tempDir('server') : undefined;
  const dbPath = tmp === undefined ? undefined : join(tmp.dir, 'leases.db');
  // The store as `leasehold serve` opens it: grants committed in groups.
  const store = options.store ?? new SqliteLeaseStore({ path: dbPath!, groupCommit: true });
  const server = createLeaseServer({
    store,
    port: 0,
    auth: options.auth,
    bodyLimitBytes: options.bodyLimitBytes,
    logLevel: process.env['LEASEHOLD_TEST_LOG'] ?? 'silent',
    processMetrics: false,
  });
  const url = await server.listen();
  return {
    url,
    server,
    store,
    dbPath,
    async close() {
      await server.close();
      await store.close();
      tmp?.remove();
    },
  };
}
