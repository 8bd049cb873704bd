export { HttpLeaseStore, type HttpLeaseStoreOptions } from './store.js';
export { HttpApiError, type FetchLike } from './client.js';
