export { EtcdLeaseStore, type EtcdLeaseStoreOptions } from './store.js';
