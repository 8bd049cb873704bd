import type { Logger } from '../../core/events.js';
import type { StoreRenewResult } from '../../core/store.js';
import { isCluster, type RedisClient } from '../../drivers/redis/client.js';
import { advanceRedisFencingEpoch, EpochFloorCache, epochKey } from './epoch.js';
import { storeError } from './errors.js';

/** The Redis key of the record that names the server incarnation that last wrote the data. */
export function incarnationKey(prefix: string): string {
  return `${prefix}incarnation`;
}

/** The fields of `INFO replication`. */
export function parseReplicationInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0) out[line.slice(0, at)] = line.slice(at + 1);
  }
  return out;
}

/**
 * Notices that the Redis server answering is another incarnation than the one that last wrote
 * the data (docs/decisions/055-redis-notices-failover-by-replication-id.md).
 *
 * `<prefix>incarnation` holds `replid`: the `master_replid` of the primary that last checked
 * it. The hash travels with the data: a replica's copy names its old primary. A promoted
 * replica, or a primary restarted without its data, answers another `master_replid`.
 *
 * The check runs once per connection: after every `ready` of the client (a reconnection, a
 * Sentinel switching to the new primary), the next grant or renewal waits for it; until then
 * they go without any extra command. While the server answers as a replica nothing is
 * remembered (no write succeeds there), so a promotion under an open connection is checked
 * on the next grant. On a change: the epoch is raised as `leasehold epoch` does (every record
 * raised and its holder cleared, the floor stored), then the record names the new replication
 * id; every check ends by re-reading the floor (another store may have raised it).
 */
export class RedisIncarnation {
  private checked = false;
  private running: Promise<void> | undefined;
  /** The highest floor a change raised: a lease at or below it was ended by the change. */
  private lossFloor = 0n;
  private readonly enabled: boolean;
  /** The fencing epoch's floor, which grants read after this check (see epoch.ts). */
  readonly epoch: EpochFloorCache;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    options: { readonly detectIncarnation: boolean },
    private readonly logger: Logger,
  ) {
    this.epoch = new EpochFloorCache(redis, epochKey(prefix), () => this.pending());
    this.enabled = options.detectIncarnation && !isCluster(redis);
    if (this.enabled) redis.on('ready', () => (this.checked = false));
  }

  /** What a grant or renewal must wait for first; undefined (the common case) when nothing. */
  pending(): Promise<void> | undefined {
    if (this.checked || !this.enabled) return undefined;
    // Its failure is the caller's grant or renewal failing: ERR_UNAVAILABLE, as theirs would be.
    this.running ??= this.check()
      .catch((err: unknown) => {
        throw storeError(err, 'checking the server incarnation');
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  /** {@link typed} for a batch; the same array when no change of incarnation was seen. */
  typedAll(
    answers: readonly StoreRenewResult[],
    leases: readonly { readonly token: bigint }[],
  ): readonly StoreRenewResult[] {
    if (this.lossFloor === 0n) return answers;
    return answers.map((a, i) => this.typed(a, leases[i]!.token));
  }

  /** A renewal's `lost`, typed `failover` when a change of incarnation ended that lease. */
  typed(answer: StoreRenewResult, token: bigint): StoreRenewResult {
    if (answer.status !== 'lost' || token > this.lossFloor || this.lossFloor === 0n) return answer;
    return { status: 'lost', reason: 'failover' };
  }

  private async check(): Promise<void> {
    const info = parseReplicationInfo(await this.redis.info('replication'));
    const replid = info['master_replid'];
    if (info['role'] !== 'master' || replid === undefined) return;
    const key = incarnationKey(this.prefix);
    const recorded = await this.redis.hget(key, 'replid');
    if (recorded !== null && recorded !== replid) {
      const { floor } = await advanceRedisFencingEpoch({ redis: this.redis, prefix: this.prefix });
      if (floor > this.lossFloor) this.lossFloor = floor;
      this.logger.warn(
        { from: recorded, to: replid, floor: floor.toString() },
        'redis: another server incarnation answers (failover or restart without data); fencing epoch raised',
      );
    }
    if (recorded !== replid) await this.redis.hset(key, 'replid', replid);
    // Another store may have raised the floor at this change: new keys must start above it.
    await this.epoch.refresh();
    this.checked = true;
  }
}
