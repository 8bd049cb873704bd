import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Queue, Worker } from 'bullmq';
import { LeaseClient } from '../../src/core/client.js';
import { RedisFence } from '../../src/fencing/redis.js';
import { RedisLeaseStore } from '../../src/stores/redis/index.js';

/** The shared test Redis. */
export const REDIS = { host: '127.0.0.1', port: 6379 };

/** BullMQ's lock for a test's jobs: short, so a stopped worker loses it quickly. */
export const LOCK_MS = 1000;

/**
 * A BullMQ queue of a test's own (its own key prefix, removed after), with a stalled-job checker
 * running in the test process, as a BullMQ deployment runs one in its workers.
 */
export interface BullMqEnv {
  /** BullMQ's key prefix and the lease store's and fence's, all unique to this run. */
  readonly prefix: string;
  readonly queueName: string;
  readonly queue: Queue;
  close(): Promise<void>;
}

export async function startBullMqEnv(label: string): Promise<BullMqEnv> {
  const prefix = `lh_${label}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const queueName = `q_${label}`;
  const queue = new Queue(queueName, { connection: REDIS, prefix });
  const checker = new Worker(queueName, null, {
    connection: REDIS,
    prefix,
    lockDuration: LOCK_MS,
    stalledInterval: 300,
    maxStalledCount: 10,
  });
  checker.on('error', () => undefined);
  await checker.startStalledCheckTimer();
  return {
    prefix,
    queueName,
    queue,
    async close() {
      await checker.close(true).catch(() => undefined);
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      await removeKeys(`${prefix}*`);
    },
  };
}

/** Deletes every key matching `pattern` from the test Redis. */
export async function removeKeys(pattern: string): Promise<void> {
  const redis = new Redis(REDIS);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** A lease client, a fence and a manual BullMQ worker for one process. */
export function bullParts(prefix: string, queueName: string) {
  const redis = new Redis(REDIS);
  const store = new RedisLeaseStore({ redis, prefix: `${prefix}:lease:` });
  const client = new LeaseClient({ store });
  const fence = new RedisFence({ redis, prefix: `${prefix}:fence:` });
  const worker = new Worker(queueName, null, { connection: REDIS, prefix, lockDuration: LOCK_MS });
  worker.on('error', () => undefined);
  return {
    redis,
    client,
    fence,
    worker,
    /** The key of the job's result, written by its attempts. */
    resultKey: (jobId: string) => `${prefix}:result:${jobId}`,
    async close() {
      await client.close();
      await worker.close(true).catch(() => undefined);
      await store.close();
      redis.disconnect();
    },
  };
}
