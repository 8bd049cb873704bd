import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import type { StoreHarness } from '../harness.js';

/** The shared Redis of the test machine; override with LEASEHOLD_TEST_REDIS_URL. */
export const TEST_REDIS_URL = process.env['LEASEHOLD_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/**
 * Every store opens its own connection under one unique prefix; teardown deletes only keys
 * under that prefix (other helpers share this Redis).
 */
export function redisHarness(): StoreHarness {
  const prefix = `leasehold-test:${process.pid}-${randomBytes(4).toString('hex')}:`;
  return {
    name: 'redis',
    async open() {
      const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      // Fail, never skip, when the selected store is unreachable.
      await redis.connect();
      return new OwningRedisLeaseStore(redis, prefix);
    },
    async teardown() {
      const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
      try {
        await deletePrefix(redis, prefix);
      } finally {
        redis.disconnect();
      }
    },
  };
}

/** Deletes every key under `prefix` (SCAN + UNLINK), never anything else. */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** A store over a client the harness made: closing the store also closes that client. */
class OwningRedisLeaseStore extends RedisLeaseStore {
  constructor(
    private readonly own: Redis,
    prefix: string,
  ) {
    super({ redis: own, prefix });
  }
  override async close(): Promise<void> {
    await super.close();
    this.own.disconnect();
  }
}
