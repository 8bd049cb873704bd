import type { FaultRun } from './fault-env.js';
import { TcpProxy } from './tcp-proxy.js';

/**
 * One run's per-worker proxies in front of one server port: each worker reaches the server
 * through a {@link TcpProxy} of its own, so that cutting one worker off leaves the others
 * connected. `onClose` runs after the proxies are closed (a per-run server's teardown).
 */
export function proxiedRun(
  port: number,
  urlFor: (proxyPort: number) => string,
  onClose?: () => Promise<void>,
): FaultRun {
  const proxies = new Map<string, TcpProxy>();
  return {
    workerUrl: async (worker) => {
      if (proxies.has(worker)) throw new Error(`worker ${worker} already has a proxy in this run`);
      const proxy = await TcpProxy.start({ host: '127.0.0.1', port });
      proxies.set(worker, proxy);
      return urlFor(proxy.port);
    },
    proxy: (worker) => {
      const p = proxies.get(worker);
      if (p === undefined) throw new Error(`worker ${worker} has no proxy in this run`);
      return p;
    },
    close: async () => {
      await Promise.all([...proxies.values()].map((p) => p.close()));
      proxies.clear();
      await onClose?.();
    },
  };
}
