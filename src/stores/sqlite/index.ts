export { SqliteLeaseStore, type SqliteLeaseStoreOptions } from './store.js';
export { sqliteLeaseTableExists } from './migrate.js';
