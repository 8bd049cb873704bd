import { createRequire } from 'node:module';
import type * as Etcd3Module from 'etcd3';
import type { Etcd3, IOptions, Watcher } from 'etcd3';

/**
 * A watch as the etcd store uses it: etcd3's `Watcher` events (`connected`, `data`, `delete`,
 * `error`) and `cancel()`. Structural, so any object of this shape fits.
 */
export type EtcdWatcher = Pick<
  Watcher,
  'on' | 'once' | 'removeListener' | 'removeAllListeners' | 'cancel'
>;

/** The part of etcd3's `WatchBuilder` the etcd store uses. */
export interface EtcdWatchBuilder {
  key(key: string | Buffer): EtcdWatchBuilder;
  inRange(range: { start: string | Buffer; end: string | Buffer }): EtcdWatchBuilder;
  only(...operations: ('put' | 'delete')[]): EtcdWatchBuilder;
  /** The watcher, created in the background (it emits `connected` once etcd created it). */
  watcher(): EtcdWatcher;
  /** The watcher, once etcd created it. */
  create(): Promise<EtcdWatcher>;
}

/**
 * The part of an etcd3 `Etcd3` client the etcd store calls: transactions and ranges, leases
 * with their keepalive stream, watches, one single-key read and `close()`. Structural, so an
 * `Etcd3` (or a namespaced or wrapped client with these members) fits.
 */
export interface EtcdClient {
  readonly kv: Pick<Etcd3['kv'], 'txn' | 'range' | 'put'>;
  readonly leaseClient: Pick<
    Etcd3['leaseClient'],
    'leaseGrant' | 'leaseRevoke' | 'leaseKeepAlive' | 'leaseTimeToLive'
  >;
  watch(): EtcdWatchBuilder;
  get(key: string | Buffer): {
    options(options: { deadline: Date }): { exec(): Promise<unknown> };
  };
  close(): void;
}

/** More etcd3 client options than the hosts: TLS `credentials`, an etcd user in `auth`, … */
export type EtcdClientOptions = Omit<IOptions, 'hosts'>;

/**
 * Opens an etcd3 client for `hosts`. The driver's constructor is loaded here, when the store
 * opens its own client, rather than by a value import at the top of this module: besides its
 * error classes (errors.ts), the structural types above are all the store takes from etcd3.
 * `createRequire` keeps this synchronous, so the store's constructor stays synchronous; etcd3
 * is CommonJS, and Node gives `require` and `import` the same module instance.
 */
export function openEtcdClient(
  hosts: string | readonly string[],
  clientOptions: EtcdClientOptions | undefined,
): Etcd3 {
  const { Etcd3: Client } = loadEtcd3();
  return new Client({ ...clientOptions, hosts: typeof hosts === 'string' ? hosts : [...hosts] });
}

function loadEtcd3(): typeof Etcd3Module {
  return createRequire(import.meta.url)('etcd3') as typeof Etcd3Module;
}
