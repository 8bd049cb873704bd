import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisFence } from '../../../src/fencing/redis.js';
import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { deletePrefix, TEST_REDIS_URL } from '../harnesses/redis.js';
import { outcomeOf } from './outcome.js';

/** RedisFence under a unique prefix: each instance its own connection; the data a list per scope. */
export function redisFenceHarness(): FenceHarness {
  const prefix = `lh:test:fence-contract:${process.pid}-${randomBytes(4).toString('hex')}:`;
  // The scope's hash tag keeps the data key in the mark's slot (Redis Cluster).
  const dataKey = (scope: string) => `${prefix}{${scope}}:data`;
  return {
    name: 'redis (RedisFence)',
    async open(policy) {
      const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      await redis.connect();
      const fence = new RedisFence({ redis, prefix, policy });
      return {
        write: async (scope, token, value, o) =>
          outcomeOf(
            await fence.commands(
              scope,
              token,
              [{ command: 'RPUSH', keys: [dataKey(scope)], args: [value] }],
              o?.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey },
            ),
          ),
        claim: (scope, token) => fence.claim(scope, token),
        accepted: (scope) => redis.lrange(dataKey(scope), 0, -1),
        close: () => redis.disconnect(),
      };
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
