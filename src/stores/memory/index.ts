export { MemoryLeaseStore } from './store.js';
export { MemoryLeaseState } from './state.js';
export type { MemoryLeaseStoreOptions } from './options.js';
