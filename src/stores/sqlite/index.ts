export { SqliteLeaseStore } from './store.js';
export type { SqliteLeaseStoreOptions } from './options.js';
export { sqliteLeaseTableExists } from './migrate.js';
export {
  advanceSqliteFencingEpoch,
  type SqliteEpochOptions,
  type SqliteEpochReport,
} from './epoch.js';
export { pruneSqliteKeys, type SqlitePruneOptions } from './retention.js';
export type { PruneReport, PruneOptions } from '../retention-report.js';
