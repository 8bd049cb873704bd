import { join } from 'node:path';
import type { LeaseStore } from '../../src/core/store.js';
import type { AuthConfig } from '../../src/http-service/auth.js';
import { createLeaseServer, type LeaseServer } from '../../src/server/server.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { checkResponses, type ResponseCheck } from './openapi-contract.js';
import { tempDir } from './tmp.js';

/** A leasehold server started in this process on a free loopback port. */
export interface TestServer {
  readonly url: string;
  readonly server: LeaseServer;
  readonly store: LeaseStore;
  readonly dbPath: string | undefined;
  /** Every answer the server sent, checked against its OpenAPI document. */
  readonly contract: ResponseCheck;
  /** Closes the server and its store; rejects when an answer broke the OpenAPI document. */
  close(): Promise<void>;
}

/**
 * Starts a server over a fresh SQLite file in a temp dir (or over `store` when given). Every
 * answer it sends is checked against the OpenAPI document; `close()` fails on a violation.
 */
export async function startTestServer(
  options: {
    store?: LeaseStore;
    auth?: AuthConfig;
    bodyLimitBytes?: number;
    maxWaitMs?: number;
  } = {},
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
    maxWaitMs: options.maxWaitMs,
    logLevel: process.env['LEASEHOLD_TEST_LOG'] ?? 'silent',
    processMetrics: false,
  });
  const contract = checkResponses(server.app);
  const url = await server.listen();
  return {
    url,
    server,
    store,
    dbPath,
    contract,
    async close() {
      await server.close();
      await store.close();
      tmp?.remove();
      if (contract.violations.length > 0) {
        throw new Error(
          `${contract.violations.length} of ${contract.checked()} answers broke the OpenAPI document:\n${contract.violations.slice(0, 20).join('\n')}`,
        );
      }
    },
  };
}

/** Bearer tokens of {@link TEST_AUTH}: one scoped to `jobs/`, one read-only, one admin. */
export const TEST_TOKENS = Object.freeze({
  jobs: 'jobs-secret-0123456789abcdef',
  reader: 'reader-secret-0123456789abcdef',
  admin: 'admin-secret-0123456789abcdef',
});

/** The auth config the server tests run with (tokens above). */
export const TEST_AUTH = {
  tokens: [
    { name: 'jobs-runner', token: TEST_TOKENS.jobs, prefixes: ['jobs/'] },
    { name: 'dashboard', token: TEST_TOKENS.reader, prefixes: [''], verbs: ['read' as const] },
    { name: 'admin', token: TEST_TOKENS.admin, prefixes: [''] },
  ],
};
