import { LeaseholdError } from '../../core/errors.js';
import { isCluster, mastersOf, type RedisClient } from '../../drivers/redis/client.js';
import { DECIMAL_LUA, LuaScript } from '../../drivers/redis/lua-script.js';
import { resolvePruneOptions, type PruneOptions, type PruneReport } from '../retention-report.js';
import { openOneShotClient } from './client.js';

/**
 * Retention for Redis: deletes the lease records of released keys and of keys expired longer
 * than a grace period. No floor needs writing: every grant's token is at least Redis TIME in
 * ms × 1024 (decision 011), so a record whose last token is below that clock floor is below
 * every token any later grant of its key can get. The check runs inside the script that
 * deletes, so it holds at the instant of the delete; records ahead of the clock are kept
 * (`kept`) until the clock passes them. Records are found with SCAN on every primary, in
 * batches; on a single Redis one script per batch, on a Cluster one per record (a script's
 * keys must share a slot, and each record is in its own).
 */

const lua = (file: string): URL => new URL(`./scripts/${file}`, import.meta.url);
const PRUNE = LuaScript.fromFiles(
  'prune',
  DECIMAL_LUA,
  lua('lease-holder.lua'),
  lua('lease-acquire.lua'),
  lua('prune.lua'),
);

/** Options of {@link pruneRedisKeys}. */
export interface RedisPruneOptions extends PruneOptions {
  /** A `redis://` URL of the lease Redis (its primary), or your ioredis client (not closed). */
  readonly redis: string | RedisClient;
  /** The store's key prefix. Defaults to `leasehold:`. */
  readonly prefix?: string;
}

/** What {@link pruneRedisKeys} did; `floor` is the clock floor at the last batch. */
export interface RedisPruneReport extends PruneReport {
  /** Free records kept because their token is still ahead of the clock floor. */
  readonly kept: number;
}

/**
 * Deletes released and long-expired lease records under a prefix (see the module comment).
 * Safe while stores use the keys. Throws `ERR_UNAVAILABLE` when Redis cannot be reached.
 */
export function pruneRedisKeys(options: RedisPruneOptions): Promise<RedisPruneReport> {
  return pruneRedis(options, true);
}

/** The pass; `checkClock: false` only for the test of a prune without the clock check. */
export async function pruneRedis(
  options: RedisPruneOptions,
  checkClock: boolean,
): Promise<RedisPruneReport> {
  const { olderThanMs, batch, maxDeleted } = resolvePruneOptions(options);
  const prefix = options.prefix ?? 'leasehold:';
  const oneShot = typeof options.redis === 'string' ? openOneShotClient(options.redis) : undefined;
  const redis: RedisClient = oneShot ?? (options.redis as RedisClient);
  if (oneShot !== undefined) redis.on('error', () => undefined);
  const args = [olderThanMs, checkClock ? '1' : '0'];
  let deleted = 0;
  let kept = 0;
  let batches = 0;
  let floor = 0n;
  const count = (reply: unknown): void => {
    const [d, k, f] = reply as [number, number, string];
    deleted += d;
    kept += k;
    batches++;
    if (BigInt(f) > floor) floor = BigInt(f);
  };
  try {
    if (oneShot !== undefined) await oneShot.connect();
    const pattern = `${globEscape(`${prefix}{`)}*${globEscape('}:lease')}`;
    for (const node of mastersOf(redis)) {
      let cursor = '0';
      do {
        const [next, names] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', batch);
        cursor = next;
        const take = names.slice(0, Math.max(0, maxDeleted - deleted));
        if (take.length === 0) continue;
        if (isCluster(redis)) {
          for (const reply of await Promise.all(take.map((n) => PRUNE.run(redis, [n], args))))
            count(reply);
        } else {
          count(await PRUNE.run(redis, take, args));
        }
      } while (cursor !== '0' && deleted < maxDeleted);
    }
    return { deleted, kept, floor, batches };
  } catch (err) {
    if (err instanceof LeaseholdError) throw err;
    throw new LeaseholdError('ERR_UNAVAILABLE', `prune: Redis did not answer: ${String(err)}`, {
      cause: err,
    });
  } finally {
    if (oneShot !== undefined) redis.disconnect();
  }
}

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}
