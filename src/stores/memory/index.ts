export { MemoryLeaseStore, MemoryLeaseState, type MemoryLeaseStoreOptions } from './store.js';
