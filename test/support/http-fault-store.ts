import { join } from 'node:path';
import type { FaultStore } from './fault-env.js';
import { proxiedRun } from './proxied-run.js';
import { startServeProcess, type ServeProcess } from './serve-process.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

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

/**
 * The HTTP store with a networked store behind the server: each worker talks directly to a
 * `leasehold serve` process of its own, and each server reaches one throwaway PostgreSQL
 * through its own TCP proxy. `proxy(worker)` is that server's proxy, so F4's partition and
 * F5's lost answer are between the server and the store: the client sees a server that
 * answers slowly or not at all, never a broken connection.
 */
export function httpPostgresStore(): FaultStore {
  let server: ThrowawayPostgres | undefined;
  let runs = 0;
  return {
    name: 'http-postgres',
    networked: true,
    minTtlMs: 1000,
    expiryLagMs: 0,
    expiryObservedByClient: false,
    async start() {
      server ??= await startThrowawayPostgres();
    },
    stop() {
      server?.destroy();
      server = undefined;
      return Promise.resolve();
    },
    run(dir) {
      if (server === undefined) throw new Error('http-postgres fault store not started');
      const schema = `lh_fault_http_${process.pid}_${++runs}`;
      const serves: ServeProcess[] = [];
      const toStore = proxiedRun(
        server.port,
        (p) => `postgres://postgres@127.0.0.1:${p}/postgres?schema=${schema}`,
        async () => {
          await Promise.all(serves.map((s) => s.stop()));
        },
      );
      return Promise.resolve({
        workerUrl: async (worker) => {
          const serve = await startServeProcess(await toStore.workerUrl(worker), dir);
          serves.push(serve);
          return serve.url;
        },
        proxy: (worker) => toStore.proxy(worker),
        close: () => toStore.close(),
      });
    },
  };
}
