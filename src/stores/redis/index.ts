export { RedisLeaseStore } from './store.js';
export { REDIS_STORE_DEFAULTS, type RedisLeaseStoreOptions } from './options.js';
export type { EvictionCheck } from './eviction-check.js';
export type { RedisClient } from '../../drivers/redis/client.js';
export type { WakeMode } from './notify.js';
export {
  advanceRedisFencingEpoch,
  type RedisEpochOptions,
  type RedisEpochReport,
} from './epoch.js';
export { pruneRedisKeys, type RedisPruneOptions, type RedisPruneReport } from './retention.js';
export type { PruneReport, PruneOptions } from '../retention-report.js';
