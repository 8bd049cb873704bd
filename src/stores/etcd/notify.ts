import type { StoreRequestOptions, Unwatch } from '../../core/store.js';
import type { EtcdClient, EtcdWatcher } from './client.js';
import { answerWithin } from '../../core/runtime/answer-within.js';
import { storeError } from './errors.js';
import { prefixEnd, type KeyLayout } from './keys.js';
import { callOptions } from './queries.js';

/**
 * The etcd store's change notifications, all etcd watches: a waiter's watch on a key's
 * contenders (`watch()`), the store's watch on deletions in its namespace (so renewals notice
 * an entry deleted behind their back), and a queued waiter's watch on the entry just ahead.
 */

/**
 * Watches every contender of `key` (`KEY/…`) and calls `onChange` on each event and after a
 * reconnect. `run` maps failures (`ERR_UNAVAILABLE`) and refuses on a closed store.
 */
export async function watchContenders(
  client: EtcdClient,
  layout: KeyLayout,
  key: string,
  onChange: () => void,
  run: <T>(fn: () => Promise<T>) => Promise<T>,
): Promise<Unwatch> {
  const dir = layout.dir(key);
  // No start revision: the watcher starts synced at the current revision, so events reach
  // it at once (a watcher started in the past is caught up only every 100 ms). The caller
  // re-checks after this resolves, so nothing before it is missed.
  const watcher = await run(() =>
    answerWithin(
      client
        .watch()
        .inRange({ start: dir, end: prefixEnd(dir) })
        .create(),
      5000,
      'creating an etcd watch',
    ),
  );
  const fire = (): void => onChange();
  watcher.on('data', fire);
  // After a reconnect events may have been missed: wake the waiter to re-check.
  watcher.on('connected', fire);
  watcher.on('error', fire);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    watcher.removeListener('data', fire);
    watcher.cancel().catch(() => undefined);
  };
}

/**
 * Watches deletions in the namespace, so that a renewal notices an entry deleted behind
 * its back (`etcdctl del`, a revoke by an operator) without reading every held key: the
 * check costs nothing per renewal. Created before the first grant, so no deletion of an
 * entry this instance holds can precede it. `onDelete` gets each deleted key and the
 * revision of its deletion. Failures are `ERR_UNAVAILABLE`.
 */
export async function watchNamespaceDeletes(
  client: EtcdClient,
  layout: KeyLayout,
  timeoutMs: number,
  onDelete: (etcdKey: string, modRevision: bigint) => void,
): Promise<EtcdWatcher> {
  try {
    const start = Buffer.from(layout.namespace, 'utf8');
    const watcher = client
      .watch()
      .inRange({ start: start.length === 0 ? Buffer.from([0]) : start, end: prefixEnd(start) })
      // etcd3's `ignore(op)` is an alias of `only(op)`: `only('delete')` is what asks
      // etcd to filter out puts (FilterType NOPUT).
      .only('delete')
      .watcher();
    const creating = new Promise<EtcdWatcher>((resolve, reject) => {
      watcher.once('connected', () => resolve(watcher));
      watcher.once('error', reject);
    });
    // etcd3 retries a watch whose authentication fails, forever and silently: a wrong
    // password would look like a slow server. One read of the namespace alongside answers
    // with the real cause (authentication failed, permission denied) at once.
    const probe = client
      .get(start.length === 0 ? '\u0001' : layout.namespace)
      .options(callOptions({ timeoutMs }))
      .exec();
    let w: EtcdWatcher;
    try {
      [w] = await answerWithin(
        Promise.all([creating, probe]),
        timeoutMs,
        'creating the etcd deletion watch',
      );
    } catch (err) {
      // Detached, a watch etcd3 could not create stops its reconnect timers (which would
      // otherwise keep the process alive after close()).
      void watcher.cancel().catch(() => undefined);
      throw err;
    }
    w.on('delete', (kv: { key: Buffer; mod_revision: string }) => {
      onDelete(kv.key.toString('utf8'), BigInt(kv.mod_revision));
    });
    return w;
  } catch (err) {
    throw storeError(err);
  }
}

/** A live watch on the deletion of one key, from the revision it was created at. */
export interface DeletionWatch {
  readonly key: string;
  readonly watcher: EtcdWatcher;
  /** etcd's revision when the watch was created: it reports every deletion after it. */
  readonly createdRev: bigint;
}

/**
 * Watches the deletion of `key` from now on (a queued waiter's entry ahead). The watch has
 * no start revision, so etcd adds it to its synced watchers and reports a deletion at once;
 * `createdRev` says from which revision on it covers, so the caller can tell whether its last
 * read is covered. `onDeleted` is called on the deletion; `onReconnect` after a reconnect or
 * an error, when events may have been missed. Failures are `ERR_UNAVAILABLE`.
 */
export async function watchDeletion(
  client: EtcdClient,
  key: string,
  rt: StoreRequestOptions,
  onDeleted: () => void,
  onReconnect: () => void,
): Promise<DeletionWatch> {
  const watcher = client.watch().key(key).only('delete').watcher();
  let created = false;
  try {
    const createdRev = await answerWithin(
      new Promise<bigint>((resolve, reject) => {
        watcher.once('connected', (res: { header: { revision: string } }) =>
          resolve(BigInt(res.header.revision)),
        );
        watcher.once('error', reject);
      }),
      rt.timeoutMs,
      'creating an etcd watch',
    );
    created = true;
    watcher.on('delete', onDeleted);
    // After a reconnect etcd3 resumes the watch from its last revision; re-check anyway.
    watcher.on('connected', onReconnect);
    watcher.on('error', onReconnect);
    return { key, watcher, createdRev };
  } catch (err) {
    throw storeError(err);
  } finally {
    if (!created) {
      watcher.on('error', () => undefined);
      watcher.cancel().catch(() => undefined);
    }
  }
}

/** Stops a deletion watch for good: no more events reach the waiter, errors are swallowed. */
export function stopDeletionWatch(watch: DeletionWatch): void {
  watch.watcher.removeAllListeners('delete');
  watch.watcher.removeAllListeners('connected');
  watch.watcher.on('error', () => undefined);
  watch.watcher.cancel().catch(() => undefined);
}
