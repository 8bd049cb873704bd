import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { catalogFenceHarness } from './catalog.js';
import { gatewayFenceHarness } from './gateway.js';
import {
  inPostgresTransactionFenceHarness,
  inSqliteTransactionFenceHarness,
} from './in-transaction.js';
import { middlewareFenceHarness } from './middleware.js';
import { postgresFenceHarness } from './postgres.js';
import { redisFenceHarness } from './redis.js';
import { sqliteFenceHarness } from './sqlite.js';

/**
 * Every fence the fence contract runs over. `LEASEHOLD_TEST_FENCES=sqlite,redis` selects some;
 * unset selects all. The middleware runs over each mark store the gateway takes; the catalog
 * and the in-transaction functions through adapters (see docs/fence-contract.md).
 */
export const FENCE_HARNESSES: Record<string, () => FenceHarness> = {
  sqlite: sqliteFenceHarness,
  postgres: postgresFenceHarness,
  redis: redisFenceHarness,
  middleware: () => middlewareFenceHarness('sqlite'),
  'middleware-postgres': () => middlewareFenceHarness('postgres'),
  'middleware-redis': () => middlewareFenceHarness('redis'),
  gateway: gatewayFenceHarness,
  'catalog-sqlite': catalogFenceHarness('sqlite'),
  'catalog-postgres': catalogFenceHarness('postgres'),
  'in-transaction-sqlite': inSqliteTransactionFenceHarness,
  'in-transaction-postgres': inPostgresTransactionFenceHarness,
};

export function selectedFences(): string[] {
  const raw = process.env['LEASEHOLD_TEST_FENCES'];
  if (raw === undefined || raw.trim() === '' || raw.trim() === 'all')
    return Object.keys(FENCE_HARNESSES);
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(n in FENCE_HARNESSES));
  if (unknown.length > 0)
    throw new Error(
      `LEASEHOLD_TEST_FENCES names unknown fences: ${unknown.join(', ')} (known: ${Object.keys(FENCE_HARNESSES).join(', ')})`,
    );
  return names;
}
