import type { FaultRun, FaultStore } from './fault-env.js';
import { startServeProcess, type ServeProcess } from './serve-process.js';

/** Two `leasehold serve` processes in front of one store namespace, for one run. */
export interface TwoServers {
  readonly servers: readonly [ServeProcess, ServeProcess];
  /** The store URL the first server opened (for `RealHarnessOptions.storeBehindServer`). */
  readonly storeUrl: string;
  /** The server a worker talks to: workers are spread over both by this choice. */
  urlOf(serverIndex: 0 | 1): string;
  /** Stops both servers and closes the run (its proxies to the store). */
  close(): Promise<void>;
}

/**
 * Starts two `leasehold serve` processes over the same namespace of `store` (a schema of one
 * PostgreSQL, a key prefix of one etcd): each reaches the store through its own proxy of the
 * fault run, as a worker would. The servers are stateless over the store, so every lease,
 * token and expiry is the store's, whichever server a client asks.
 */
export async function startTwoServers(store: FaultStore, dir: string): Promise<TwoServers> {
  const run: FaultRun = await store.run(dir);
  const started: ServeProcess[] = [];
  const urls: string[] = [];
  try {
    for (const name of ['server-1', 'server-2']) {
      urls.push(await run.workerUrl(name));
      started.push(await startServeProcess(urls.at(-1)!, dir));
    }
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    await run.close();
    throw err;
  }
  const servers = [started[0]!, started[1]!] as const;
  return {
    servers,
    storeUrl: urls[0]!,
    urlOf: (i) => servers[i].url,
    async close() {
      await Promise.all(servers.map((s) => s.stop()));
      await run.close();
    },
  };
}
