export { EtcdLeaseStore } from './store.js';
export type { EtcdLeaseStoreOptions } from './options.js';
export type { EtcdClient, EtcdClientOptions, EtcdWatchBuilder, EtcdWatcher } from './client.js';
export { advanceEtcdFencingEpoch, type EtcdEpochOptions, type EtcdEpochReport } from './epoch.js';
