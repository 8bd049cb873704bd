export { HttpLeaseStore, type HttpLeaseStoreOptions } from './store.js';
export { HttpApiError } from './client.js';
