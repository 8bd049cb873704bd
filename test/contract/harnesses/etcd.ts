import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import type { StoreHarness } from '../harness.js';

/**
 * etcd behind the contract: throwaway etcd processes (one member, or a 3-member Raft
 * cluster) on loopback ports, started on first use and killed at teardown. Each `open()` is
 * a new store instance with its own etcd client (its own connections and sessions).
 */
function etcdHarness(name: string, size: number): () => StoreHarness {
  return () => {
    let cluster: Promise<EtcdCluster> | undefined;
    return {
      name,
      async open() {
        cluster ??= EtcdCluster.start({ size, label: name });
        const c = await cluster;
        // The test servers run a 500 ms election timeout, so etcd honours 1 s TTLs.
        return new EtcdLeaseStore({ hosts: c.endpoints, minTtlMs: 1000 });
      },
      async teardown() {
        if (cluster !== undefined) await (await cluster.catch(() => undefined))?.stop();
      },
    };
  };
}

export const etcdSingleHarness = etcdHarness('etcd', 1);
export const etcdClusterHarness = etcdHarness('etcd-cluster', 3);
