import { randomBytes } from 'node:crypto';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import type { RedisClient } from '../../../src/drivers/redis/client.js';
import { RedisCluster } from '../../support/redis-cluster.js';
import { RedisSentinelGroup } from '../../support/redis-sentinel.js';
import type { StoreHarness } from '../harness.js';

/** A store over a client the harness made: closing the store also closes that client. */
class OwningStore extends RedisLeaseStore {
  constructor(
    private readonly own: RedisClient,
    prefix: string,
  ) {
    super({ redis: own, prefix, evictionCheck: 'refuse' });
  }
  override async close(): Promise<void> {
    await super.close();
    this.own.disconnect();
  }
}

/**
 * Redis behind the contract in a deployment shape: throwaway processes on loopback ports,
 * started on first use and killed at teardown. Each `open()` is a new store with its own
 * ioredis client — a `Cluster` client for the 3-master + 3-replica Cluster, a client with
 * `sentinels` for the Sentinel group (1 master, 2 replicas, 3 sentinels). Keys of the cases
 * spread over many slots, so one case's keys land on several masters.
 */
function topologyHarness<T extends { stop(): Promise<void> }>(
  name: string,
  start: () => Promise<T>,
  client: (t: T) => RedisClient,
): () => StoreHarness {
  return () => {
    let running: Promise<T> | undefined;
    const prefix = `lh-contract:${randomBytes(4).toString('hex')}:`;
    return {
      name,
      async open() {
        running ??= start();
        const t = await running;
        const store = new OwningStore(client(t), prefix);
        // Fail, never skip, when the deployment is unreachable or unsafe.
        await store.ready();
        return store;
      },
      async teardown() {
        if (running !== undefined) await (await running.catch(() => undefined))?.stop();
      },
    };
  };
}

export const redisClusterHarness = topologyHarness(
  'redis-cluster',
  () => RedisCluster.start(),
  (c) => c.client(),
);

export const redisSentinelHarness = topologyHarness(
  'redis-sentinel',
  () => RedisSentinelGroup.start(),
  (g) => g.client(),
);
