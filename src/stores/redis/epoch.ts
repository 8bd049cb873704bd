import { LeaseholdError } from '../../core/errors.js';
import { parseToken } from '../../core/validate.js';
import { epochFloor } from '../epoch-floor.js';
import { openOneShotClient } from './client.js';
import { mastersOf, type RedisClient } from '../../drivers/redis/client.js';
import { runEpochRaise } from './scripts.js';

/**
 * The fencing epoch of a Redis lease store. Its record is one hash, `<prefix>epoch`
 * (`floor`, and `at`: Redis TIME in ms when it was raised). `leasehold epoch` raises every
 * lease record to the floor (epoch-raise.lua) and stores it there; each store reads it and
 * passes it to every grant, so that keys with no record (lost with the data, or new) start
 * above it too. It is an argument rather than a key the script reads because in a Cluster the
 * record and the epoch hash live in different slots.
 *
 * What Redis cannot tell us: an RDB restored from an old copy, or a replica promoted after it
 * missed writes, holds no trace of what it lost, and Redis's run id changes at every restart,
 * restored or not. So the store does not notice a restore; the time floor (TIME_ms × 1024)
 * keeps new tokens above old ones under its assumptions, and fences reject any token issued
 * again. The epoch makes that explicit, also for keys whose counter runs ahead of the clock.
 */

/** The Redis key of a store's epoch record. */
export function epochKey(prefix: string): string {
  return `${prefix}epoch`;
}

/** How long a store uses the floor it read before reading it again, in ms. */
export const EPOCH_REFRESH_MS = 1000;

/** The floor a store passes to its grants, read from Redis at most once per refresh period. */
export class EpochFloorCache {
  private floor = 0n;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<bigint> | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly key: string,
    /** Something grants must wait for first (the incarnation check), or undefined. */
    private readonly gate: () => Promise<unknown> | undefined = () => undefined,
  ) {}

  /**
   * The floor: waits for the first read; afterwards answers the cached value at once and
   * refreshes it in the background once it is older than {@link EPOCH_REFRESH_MS}. A failed
   * refresh keeps the last value (the floor never goes down).
   */
  current(): bigint | Promise<bigint> {
    const gate = this.gate();
    if (gate !== undefined) return gate.then(() => this.current());
    if (performance.now() - this.readAt <= EPOCH_REFRESH_MS) return this.floor;
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    if (this.readAt === Number.NEGATIVE_INFINITY) return this.reading; // the first read: wait
    this.reading.catch(() => undefined);
    return this.floor;
  }

  /** Reads the floor now (after this store raised it). */
  refresh(): Promise<bigint> {
    return this.read();
  }

  private async read(): Promise<bigint> {
    const raw = await this.redis.hget(this.key, 'floor');
    const floor = raw === null ? 0n : BigInt(raw);
    if (floor > this.floor) this.floor = floor;
    this.readAt = performance.now();
    return this.floor;
  }
}

/** Options for {@link advanceRedisFencingEpoch}. */
export interface RedisEpochOptions {
  /** A `redis://` URL of the lease Redis (its primary), or your ioredis client (not closed). */
  readonly redis: string | RedisClient;
  /** The stores' key prefix. Defaults to `leasehold:`. */
  readonly prefix?: string;
  /** A floor known from outside Redis, e.g. a fenced resource's high-water mark. */
  readonly atLeast?: bigint | string;
}

/** What {@link advanceRedisFencingEpoch} did. */
export interface RedisEpochReport {
  /** Every later grant gets a token greater than this. */
  readonly floor: bigint;
  /** Lease records raised or cleared of their holder. */
  readonly rowsRaised: number;
}

/**
 * Advances the fencing epoch of a Redis lease store after Redis lost writes (an old RDB
 * restored, a failover to a replica that missed writes): every later token exceeds every token
 * issued before.
 *
 * The floor is {@link epochFloor} of Redis TIME, the highest token in any lease record, the
 * previous epoch's floor carried forward, and `atLeast`. It is stored first (stores pick it up
 * within {@link EPOCH_REFRESH_MS}; run this before clients come back), then every record under
 * the prefix is raised to it and its holder cleared, each in one script. Running it again is
 * harmless. Throws `ERR_UNAVAILABLE` when Redis cannot be reached.
 */
export async function advanceRedisFencingEpoch(
  options: RedisEpochOptions,
): Promise<RedisEpochReport> {
  const prefix = options.prefix ?? 'leasehold:';
  const atLeast = options.atLeast === undefined ? 0n : parseToken(options.atLeast, 'atLeast');
  const own = typeof options.redis === 'string';
  const oneShot = typeof options.redis === 'string' ? openOneShotClient(options.redis) : undefined;
  const redis: RedisClient = oneShot ?? (options.redis as RedisClient);
  if (own) redis.on('error', () => undefined);
  try {
    if (oneShot !== undefined) await oneShot.connect();
    const nodes = mastersOf(redis);
    const records: string[] = [];
    const pattern = `${globEscape(`${prefix}{`)}*${globEscape('}:lease')}`;
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        records.push(...batch);
      } while (cursor !== '0');
    }
    let highest = 0n;
    for (const name of records) {
      const token = await redis.hget(name, 'token');
      if (token !== null && BigInt(token) > highest) highest = BigInt(token);
    }
    const [sec, usec] = (await redis.time()) as [string, string];
    const nowMs = BigInt(sec) * 1000n + BigInt(usec) / 1000n;
    const [prevFloor, prevAt] = await redis.hmget(epochKey(prefix), 'floor', 'at');
    const floor = epochFloor({
      nowMs,
      highest,
      previous: [{ floor: BigInt(prevFloor ?? '0'), atMs: BigInt(prevAt ?? '0') }],
      atLeast,
    });
    await redis.hset(epochKey(prefix), 'floor', floor.toString(), 'at', nowMs.toString());
    let rowsRaised = 0;
    for (const record of records) {
      const base = record.slice(0, record.length - ':lease'.length);
      const keys = { record, channel: `${base}:released` };
      if (await runEpochRaise(redis, keys, floor)) rowsRaised++;
    }
    return { floor, rowsRaised };
  } catch (err) {
    if (err instanceof LeaseholdError) throw err;
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `epoch: Redis did not raise the floor: ${String(err)}`,
      {
        cause: err,
      },
    );
  } finally {
    if (own) redis.disconnect();
  }
}

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}
