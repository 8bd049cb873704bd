export {
  RedisLeaseStore,
  REDIS_STORE_DEFAULTS,
  type RedisLeaseStoreOptions,
  type EvictionCheck,
} from './store.js';
export type { RedisClient } from './scripts.js';
export type { WakeMode } from './watchers.js';
export {
  RedisFence,
  REDIS_FENCE_DEFAULTS,
  type RedisFenceOptions,
  type FenceWriteOptions,
  type FenceCommand,
  type FencePolicy,
  type FenceScript,
} from '../../fencing/redis.js';
