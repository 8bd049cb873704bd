export { SqliteLeaseStore, type SqliteLeaseStoreOptions } from './store.js';
