import type { StoreRenewRequest, StoreRenewResult } from '../../core/store.js';
import { isCluster, type RedisClient } from '../../drivers/redis/client.js';
import { leaseRecord, sameSlotGroups } from './keys.js';
import { runRenewMany } from './scripts.js';

/** A lost renewal's answer: one object for all of them. */
const LOST: StoreRenewResult = Object.freeze({ status: 'lost' });

/**
 * Renews `leases` (keys under `prefix`): one renew-many.lua call for the whole batch on one
 * node (standalone, Sentinel). On a Cluster a script's keys must share a slot, so the batch is
 * split by hash tag and the scripts go out together (pipelined on each node's connection).
 * `beforeSend` runs before each script is sent (the write coalescer's hold). Rejects with the
 * driver's error.
 */
export async function renewManyOn(
  redis: RedisClient,
  prefix: string,
  leases: readonly StoreRenewRequest[],
  beforeSend: () => void,
): Promise<readonly StoreRenewResult[]> {
  // Per lease only its record's name and its answer: the objects made per lease on the way
  // (items, their positions, each group's copy) cost CPU per renewal (decision 035).
  const records = new Array<string>(leases.length);
  for (let i = 0; i < leases.length; i++) records[i] = leaseRecord(prefix, leases[i]!.key);
  const groups = isCluster(redis)
    ? sameSlotGroups(
        leases.map((_, i) => i),
        (i) => records[i]!,
      )
    : [undefined];
  const results = new Array<StoreRenewResult>(leases.length);
  await Promise.all(
    groups.map(async (group) => {
      beforeSend();
      const { serverMs, renewed } = await runRenewMany(redis, leases, records, group);
      const n = group === undefined ? leases.length : group.length;
      for (let k = 0; k < n; k++) {
        const i = group === undefined ? k : group[k]!;
        results[i] = renewed(k)
          ? { status: 'renewed', expiresAtWallMs: serverMs + leases[i]!.ttlMs }
          : LOST;
      }
    }),
  );
  return results;
}
