import type { Etcd3, IOptions, Watcher } from 'etcd3';
import { etcd3 } from './driver.js';

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

/** Opens an etcd3 client for `hosts`. */
export function openEtcdClient(
  hosts: string | readonly string[],
  clientOptions: EtcdClientOptions | undefined,
): Etcd3 {
  return new etcd3.Etcd3({
    ...clientOptions,
    hosts: typeof hosts === 'string' ? hosts : [...hosts],
  });
}
