/**
 * A waiting process for the etcd queue tests (not a test file itself).
 * argv[2]: JSON { endpoints, key, ttlMs, waitMs, id }. Acquires `key` with `wait` through the
 * real client over an `EtcdLeaseStore`, and prints one JSON event per line on stdout:
 *   parked (each time it is parked in etcd's queue) · granted {token} · busy · unavailable
 *   · released. After a grant it holds (renewing) until it reads a line `release` on stdin,
 *   then releases and exits.
 */
import { createInterface } from 'node:readline';
import { LeaseClient } from '../../../src/core/client.js';
import type { StoreAcquireRequest, StoreQueuedOptions } from '../../../src/core/store.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';

interface Config {
  readonly endpoints: string[];
  readonly key: string;
  readonly ttlMs: number;
  readonly waitMs: number;
  readonly id: string;
}

const cfg = JSON.parse(process.argv[2]!) as Config;
const emit = (ev: Record<string, unknown>): void => {
  process.stdout.write(
    `${JSON.stringify({ ...ev, id: cfg.id }, (_k, v: unknown) =>
      typeof v === 'bigint' ? v.toString() : v,
    )}\n`,
  );
};

const inner = new EtcdLeaseStore({ hosts: cfg.endpoints, minTtlMs: 1000 });
// Reports each park; everything else is the real store.
const store = Object.assign(Object.create(inner) as EtcdLeaseStore, {
  acquireQueued: (r: StoreAcquireRequest, o: StoreQueuedOptions) =>
    inner.acquireQueued(r, { ...o, onParked: () => emit({ ev: 'parked' }) }),
});
const client = new LeaseClient({ store, ownerId: cfg.id, pollInterval: 60_000 });
const lines = createInterface({ input: process.stdin });
const released = new Promise<void>((resolve) => {
  lines.on('line', (l) => {
    if (l.trim() === 'release') resolve();
  });
  lines.on('close', () => resolve());
});

const r = await client.acquire(cfg.key, { ttl: cfg.ttlMs, wait: cfg.waitMs });
if (r.status === 'acquired') {
  emit({ ev: 'granted', token: r.lease.token });
  await released;
  const rel = await r.lease.release();
  emit({ ev: 'released', status: rel.status });
} else {
  emit({ ev: r.status, cause: r.status === 'unavailable' ? String(r.cause) : undefined });
}
lines.close();
await client.close();
await inner.close();
