import { invalidArgument } from '../core/errors.js';
import type { LeaseStore } from '../core/store.js';
import { openStore } from '../stores/open-store.js';

/** The URL schemes the fault harness runs workers on: stores other processes can share. */
const HARNESS_SCHEMES = ['sqlite', 'postgres', 'postgresql', 'redis', 'rediss', 'etcd', 'http'];

/**
 * Opens a lease store from a URL, for the real-process harness and its worker processes:
 * `sqlite:/path/to/leases.db`, `postgres://…[?schema=S]`, `redis://…[?prefix=P]`,
 * `etcd://host:port[?namespace=P]`, `http://host:port` (a `leasehold serve` process: the
 * fault suite's HTTP store rows test client → server → store) — parsed by {@link openStore},
 * the CLI's opener, so the harness and the CLI read one URL form. The harness itself never
 * names a store. `memory:` is refused: a memory store is private to one process.
 */
export function openStoreFromUrl(url: string): Promise<LeaseStore> {
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(url)?.[1];
  if (scheme === undefined || !HARNESS_SCHEMES.includes(scheme)) {
    throw invalidArgument(
      'storeUrl',
      `must use one of the schemes ${HARNESS_SCHEMES.map((s) => `${s}:`).join(', ')}`,
      url,
    );
  }
  return openStore(url);
}
