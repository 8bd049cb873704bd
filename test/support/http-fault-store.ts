import { join } from 'node:path';
import type { FaultStore } from './fault-env.js';
import { proxiedRun } from './proxied-run.js';
import { startServeProcess } from './serve-process.js';

/**
 * The HTTP store in the fault suite: client (a worker's `HttpLeaseStore`) → TCP proxy →
 * `leasehold serve` (its own process) → SQLite. Each run starts its own server over a fresh
 * SQLite file in the run's directory (about a second on a loaded machine), so runs share no
 * keys; the proxy, per worker, sits between the client and the server, where F4's partition
 * and F5's lost answer happen. The server reports the SQLite store's expiry instants, so the
 * history's store times are the store's, as on SQLite.
 */
export function httpStore(): FaultStore {
  return {
    name: 'http',
    networked: true,
    minTtlMs: 1000,
    expiryLagMs: 0,
    expiryObservedByClient: false,
    start: () => Promise.resolve(),
    stop: () => Promise.resolve(),
    async run(dir) {
      const server = await startServeProcess(`sqlite:${join(dir, 'leases.db')}`, dir);
      return proxiedRun(
        server.port,
        (p) => `http://127.0.0.1:${p}`,
        () => server.stop(),
      );
    },
  };
}
