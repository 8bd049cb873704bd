import { answerWithin } from '../../core/runtime/answer-within.js';
import { LeaseholdError } from '../../core/errors.js';
import type { Logger } from '../../core/events.js';
import { isCluster, type RedisClient, type RedisNodeClient } from '../../drivers/redis/client.js';

/** How long one node may take to answer the check before it is left for the next one. */
const CHECK_TIMEOUT_MS = 2000;

/** What the store does when Redis may evict keys (`maxmemory-policy` other than `noeviction`). */
export type EvictionCheck = 'warn' | 'refuse' | 'off';

/**
 * The `maxmemory-policy` check of every server that holds or may come to hold lease records.
 *
 * - A single node (standalone, or the master a Sentinel client found): checked when the store
 *   starts, and again after every reconnect, since a Sentinel failover or a DNS change may
 *   have put another server behind the same client.
 * - A Cluster: `CONFIG GET` through the Cluster client reaches one node only, so each node of
 *   the client's slot map is asked on its own connection — replicas too, since a failover
 *   makes one of them a master that holds records. Nodes not yet checked (a node added to the
 *   cluster, one that was down) are checked whenever the client refreshes its slot map.
 *
 * An unsafe policy in `refuse` mode sets {@link refused}; every later operation throws it. A
 * node that cannot be asked (down, frozen past 2 s, `CONFIG` renamed) is logged and asked
 * again next time.
 */
export class EvictionGuard {
  /** Set once an unsafe policy was found in `refuse` mode: the store's operations throw it. */
  refused: LeaseholdError | undefined;
  private readonly checked = new Set<string>();
  private readonly warned = new Set<string>();
  private pending: Promise<void> = Promise.resolve();
  private readonly again = (): void => {
    // One check at a time: a slot refresh storm must not fan out CONFIG GETs.
    this.pending = this.pending.then(() => this.checkAll());
  };
  /** Whether the client's next 'ready' is its first connection, which the first check covers. */
  private firstReady = false;
  private readonly reconnected = (): void => {
    if (this.firstReady) {
      this.firstReady = false;
      return;
    }
    // A reconnect may have reached another server (a Sentinel failover): warn about it anew.
    this.warned.clear();
    this.again();
  };

  constructor(
    private readonly redis: RedisClient,
    private readonly mode: 'warn' | 'refuse',
    private readonly logger: Logger,
  ) {}

  /** Runs the first check; resolves when it is done (it never rejects). */
  start(): Promise<void> {
    this.firstReady = this.redis.status !== 'ready';
    const first = this.checkAll();
    this.pending = first;
    if (isCluster(this.redis)) this.redis.on('refresh', this.again);
    else this.redis.on('ready', this.reconnected);
    return first;
  }

  /** Stops checking (the store closed); the client is the caller's and stays as it was. */
  stop(): void {
    this.redis.off('refresh', this.again);
    this.redis.off('ready', this.reconnected);
  }

  private async checkAll(): Promise<void> {
    if (!isCluster(this.redis)) {
      await this.checkNode(this.redis, 'the server');
      return;
    }
    // Through the Cluster client first: it waits for the slot map (or fails as the client
    // fails), after which nodes() lists every master and replica.
    const first = await this.policyOf(this.redis, 'the cluster');
    if (first === undefined) return;
    // All nodes at once, each bounded: a frozen node must not hold up the store's start.
    await Promise.all(
      this.redis.nodes('all').map((node) => {
        const name = `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
        return this.checked.has(name) ? Promise.resolve() : this.checkNode(node, name, true);
      }),
    );
  }

  private async checkNode(node: RedisNodeClient, name: string, bounded = false): Promise<void> {
    const policy = await this.policyOf(node, name, bounded);
    if (policy === undefined) return;
    this.checked.add(name);
    if (policy === 'noeviction' || this.warned.has(name)) return;
    this.warned.add(name);
    const message =
      `Redis maxmemory-policy is ${policy} on ${name}: under memory pressure Redis may evict ` +
      `lease records, letting two holders in at once (tokens then rely on the TIME floor). ` +
      `Set maxmemory-policy noeviction on every lease Redis server.`;
    if (this.mode === 'refuse') {
      this.refused ??= new LeaseholdError('ERR_UNAVAILABLE', message);
      this.logger.error({ policy, node: name }, message);
    } else {
      this.logger.warn({ policy, node: name }, message);
    }
  }

  /**
   * The node's policy, or undefined (logged) when it cannot be read. `bounded`: give up after {@link CHECK_TIMEOUT_MS} (a Cluster node, asked again at the next
   * slot refresh). Unbounded, the command waits for the client's connection like any other.
   */
  private async policyOf(
    node: RedisClient,
    name: string,
    bounded = false,
  ): Promise<string | undefined> {
    try {
      const asked = node.config('GET', 'maxmemory-policy');
      const reply = await (bounded
        ? answerWithin(asked, CHECK_TIMEOUT_MS, `CONFIG GET maxmemory-policy on ${name}`)
        : asked);
      if (Array.isArray(reply) && typeof reply[1] === 'string') return reply[1];
      return 'noeviction';
    } catch (err) {
      this.logger.info(
        { err: String(err), node: name },
        'could not read maxmemory-policy (CONFIG disabled?); make sure it is noeviction',
      );
      return undefined;
    }
  }
}
