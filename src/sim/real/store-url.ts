import { invalidArgument } from '../../core/errors.js';
import type { LeaseStore } from '../../core/store.js';
import { SqliteLeaseStore } from '../../stores/sqlite/store.js';

/**
 * Opens a lease store from a URL, for the real-process harness and its worker processes:
 * `sqlite:/path/to/leases.db`. Other stores plug in here by scheme (postgres://, redis://,
 * etcd://) once their adapters exist; the harness itself never names a store.
 */
export function openStoreFromUrl(url: string): Promise<LeaseStore> {
  if (url.startsWith('sqlite:')) {
    return Promise.resolve(new SqliteLeaseStore({ path: url.slice('sqlite:'.length) }));
  }
  throw invalidArgument(
    'storeUrl',
    'has a scheme the fault harness does not know yet (sqlite:PATH)',
    url,
  );
}
