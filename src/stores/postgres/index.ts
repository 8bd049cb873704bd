export { PostgresLeaseStore } from './store.js';
export type { IncarnationChange } from './incarnation.js';
export type { PostgresLeaseStoreOptions } from './options.js';
export {
  migratePostgresLeaseStore,
  postgresLeaseTableExists,
  type PostgresMigrateOptions,
} from './migrate.js';
export type { MigrationReport } from '../../drivers/postgres/migrate.js';
export {
  advancePostgresFencingEpoch,
  EPOCH_TOKENS_PER_MS,
  type PostgresEpochOptions,
  type PostgresEpochReport,
} from './epoch.js';
export type {
  PgPool,
  PgPoolClient,
  PgConnectionConfig,
  PostgresConnectionOptions,
} from '../../drivers/postgres/client.js';
export { prunePostgresKeys, type PostgresPruneOptions } from './retention.js';
export type { PruneReport, PruneOptions } from '../retention-report.js';
