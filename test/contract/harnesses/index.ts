import type { StoreHarness } from '../harness.js';
import { httpPostgresHarness } from './http-postgres.js';
import { httpSqliteHarness } from './http-sqlite.js';
import { memoryHarness } from './memory.js';
import { postgresHarness } from './postgres.js';
import { redisHarness } from './redis.js';
import { redisClusterHarness, redisSentinelHarness } from './redis-topologies.js';
import { sqliteGroupCommitHarness, sqliteHarness } from './sqlite.js';
import { etcdClusterHarness, etcdSingleHarness } from './etcd.js';

/**
 * Every store the suite knows. `LEASEHOLD_TEST_STORES=memory,sqlite` selects some; unset
 * selects all. A selected store that cannot be reached fails the run — nothing is skipped.
 */
export const HARNESSES: Record<string, () => StoreHarness> = {
  memory: memoryHarness,
  sqlite: sqliteHarness,
  'sqlite-group-commit': sqliteGroupCommitHarness,
  postgres: postgresHarness,
  redis: redisHarness,
  'redis-cluster': redisClusterHarness,
  'redis-sentinel': redisSentinelHarness,
  etcd: etcdSingleHarness,
  'etcd-cluster': etcdClusterHarness,
  'http-sqlite': httpSqliteHarness,
  'http-postgres': httpPostgresHarness,
};

export function selectedHarnesses(): string[] {
  const raw = process.env['LEASEHOLD_TEST_STORES'];
  if (raw === undefined || raw.trim() === '' || raw.trim() === 'all') return Object.keys(HARNESSES);
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(n in HARNESSES));
  if (unknown.length > 0) {
    throw new Error(
      `LEASEHOLD_TEST_STORES names unknown stores: ${unknown.join(', ')} (known: ${Object.keys(HARNESSES).join(', ')})`,
    );
  }
  return names;
}
