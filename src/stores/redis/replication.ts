import type { Logger } from '../../core/events.js';
import type { StoreAcquireRequest } from '../../core/store.js';
import type { RedisClient } from '../../drivers/redis/client.js';
import { replicationError } from './errors.js';
import { runRelease, type LeaseKeys } from './scripts.js';

/** The store's `replicas` option: how many replicas must acknowledge a grant, how soon. */
export interface ReplicaAcks {
  readonly replicas: number;
  readonly timeoutMs: number;
}

/**
 * Waits (`WAIT`) until `acks.replicas` replicas acknowledged the grant of `token` on `keys`.
 * A grant that only the primary knows can vanish on failover: when too few acknowledge, it is
 * given back and the call rejects with `ERR_UNAVAILABLE`, rather than hand the caller a lease
 * that could not be made durable enough.
 */
export async function awaitReplication(
  redis: RedisClient,
  acks: ReplicaAcks,
  logger: Logger,
  keys: LeaseKeys,
  request: StoreAcquireRequest,
  token: bigint,
): Promise<void> {
  let acked: number;
  try {
    acked = await redis.wait(acks.replicas, acks.timeoutMs);
  } catch (err) {
    acked = -1;
    logger.warn({ key: request.key, err: String(err) }, 'redis WAIT failed');
  }
  if (acked >= acks.replicas) return;
  await runRelease(redis, keys, request.leaseId, token).catch(() => undefined);
  throw replicationError(acked, acks.replicas, acks.timeoutMs);
}
