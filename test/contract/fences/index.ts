import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { gatewayFenceHarness } from './gateway.js';
import { middlewareFenceHarness } from './middleware.js';
import { postgresFenceHarness } from './postgres.js';
import { redisFenceHarness } from './redis.js';
import { sqliteFenceHarness } from './sqlite.js';

/**
 * Every fence the fence contract runs over. `LEASEHOLD_TEST_FENCES=sqlite,redis` selects some;
 * unset selects all. The catalog is not here: its publish is a pointer move with an expected
 * version, not an appending write, and its claim is covered by test/fencing/catalog.
 */
export const FENCE_HARNESSES: Record<string, () => FenceHarness> = {
  sqlite: sqliteFenceHarness,
  postgres: postgresFenceHarness,
  redis: redisFenceHarness,
  middleware: middlewareFenceHarness,
  gateway: gatewayFenceHarness,
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
