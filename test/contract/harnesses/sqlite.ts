import { join } from 'node:path';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { tempDir } from '../../support/tmp.js';
import type { StoreHarness } from '../harness.js';

export function sqliteHarness(): StoreHarness {
  return sqliteFileHarness('sqlite', false);
}

/** The same store with group commit (grants of one loop turn share a transaction and fsync). */
export function sqliteGroupCommitHarness(): StoreHarness {
  return sqliteFileHarness('sqlite-group-commit', true);
}

function sqliteFileHarness(name: string, groupCommit: boolean): StoreHarness {
  const tmp = tempDir(`contract-${name}`);
  const path = join(tmp.dir, 'leases.db');
  return {
    name,
    open: () => Promise.resolve(new SqliteLeaseStore({ path, groupCommit })),
    teardown: () => Promise.resolve(tmp.remove()),
  };
}
