import { join } from 'node:path';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { tempDir } from '../../support/tmp.js';
import type { StoreHarness } from '../harness.js';

export function sqliteHarness(): StoreHarness {
  const tmp = tempDir('contract-sqlite');
  const path = join(tmp.dir, 'leases.db');
  return {
    name: 'sqlite',
    open: () => Promise.resolve(new SqliteLeaseStore({ path })),
    teardown: () => Promise.resolve(tmp.remove()),
  };
}
