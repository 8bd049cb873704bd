import { invalidArgument } from '../core/errors.js';
import type { LeaseStore } from '../core/store.js';

/** Options every store opener may use; each opener ignores what it does not need. */
export interface OpenStoreOptions {
  /** Bearer token for `http(s)://` stores (a leasehold server with auth). */
  readonly apiToken?: string;
}

/**
 * Opens a store from its URL. Receives the URL exactly as given (`sqlite:./x.db` is not a
 * valid WHATWG URL with a path, so openers parse their own form).
 */
export type StoreOpener = (url: string, options: OpenStoreOptions) => Promise<LeaseStore>;

/**
 * The store URL schemes leasehold knows, by scheme (without the colon). Each opener loads its
 * store lazily, so a user of one backend never loads another's driver.
 *
 * Extension point: `postgres`, `redis` and `etcd` are added here as their stores land.
 */
const OPENERS = new Map<string, StoreOpener>([
  [
    'sqlite',
    async (url) => {
      const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
      if (path === '') throw invalidArgument('store', 'sqlite: needs a file path', url);
      const { SqliteLeaseStore } = await import('./sqlite/index.js');
      return new SqliteLeaseStore({ path });
    },
  ],
  [
    'memory',
    async () => {
      const { MemoryLeaseStore } = await import('./memory/index.js');
      return new MemoryLeaseStore();
    },
  ],
  [
    'http',
    async (url, options) => {
      const { HttpLeaseStore } = await import('./http/index.js');
      return HttpLeaseStore.connect({ url, apiToken: options.apiToken });
    },
  ],
  [
    'https',
    async (url, options) => {
      const { HttpLeaseStore } = await import('./http/index.js');
      return HttpLeaseStore.connect({ url, apiToken: options.apiToken });
    },
  ],
]);

/** Registers (or replaces) the opener for a URL scheme such as `postgres`. */
export function registerStoreScheme(scheme: string, opener: StoreOpener): void {
  if (!/^[a-z][a-z0-9+.-]*$/.test(scheme)) {
    throw invalidArgument('scheme', 'must be a lowercase URL scheme without the colon', scheme);
  }
  OPENERS.set(scheme, opener);
}

/** The URL schemes {@link openStore} understands, for help texts. */
export function storeSchemes(): string[] {
  return [...OPENERS.keys()];
}

/**
 * Opens a {@link LeaseStore} from a URL: `sqlite:PATH`, `memory:`, `http://HOST:PORT` (a
 * leasehold server), and the schemes registered with {@link registerStoreScheme}. A bare path
 * ending in `.db` is taken as `sqlite:PATH`. Throws `ERR_INVALID_ARGUMENT` for an unknown
 * scheme and `ERR_UNAVAILABLE` when the store cannot be opened.
 *
 * @example
 * const store = await openStore('sqlite:./leasehold.db');
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<LeaseStore> {
  if (typeof url !== 'string' || url.length === 0) {
    throw invalidArgument('store', 'must be a store URL such as sqlite:./leasehold.db', url);
  }
  if (/\.db$/.test(url) && !url.includes(':')) return openStore(`sqlite:${url}`, options);
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(url)?.[1];
  const opener = scheme === undefined ? undefined : OPENERS.get(scheme);
  if (opener === undefined) {
    throw invalidArgument(
      'store',
      `must start with one of ${[...OPENERS.keys()].map((s) => `${s}:`).join(', ')}`,
      url,
    );
  }
  return opener(url, options);
}
