import { openNodeClient } from './client.js';
import { type RedisClusterClient, type RedisNodeClient } from '../../drivers/redis/client.js';
import type { Logger } from '../../core/events.js';

/** What a {@link ClusterSubscription} tells its owner. */
export interface SubscriptionEvents {
  message(channel: string, message: string): void;
  /**
   * The subscription moved to another node and every channel is subscribed there again:
   * releases published meanwhile were not seen.
   */
  resubscribed(): void;
}

/** The connection's name in `CLIENT LIST`, so operators can tell which node it is on. */
const CONNECTION_NAME = 'leasehold:release-subscriber';
const MAX_BACKOFF_MS = 2000;

/**
 * The release subscription of a store on a Redis Cluster: one connection to one node, moved
 * to another node when it ends. A Cluster relays every `PUBLISH` to every node, masters and
 * replicas, so any node will do.
 *
 * Why not the Cluster client's own `subscribe`: when its subscriber node dies, ioredis moves
 * the subscription to another node and emits no event, so nobody learns that releases
 * published in the gap were missed. Here the move is ours: once every channel is subscribed
 * on the new node, {@link SubscriptionEvents.resubscribed} runs and the store wakes every
 * waiter, who then tries again instead of sleeping until its poll or the holder's expiry.
 */
export class ClusterSubscription {
  private readonly channels = new Set<string>();
  /** Undefined while no node is known to connect to (retried with a growing delay). */
  private conn: RedisNodeClient | undefined;
  private closed = false;
  private failures = 0;
  /** Connections opened so far: every one after the first is a move. */
  private opened = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cluster: RedisClusterClient,
    private readonly events: SubscriptionEvents,
    private readonly logger: Logger,
  ) {
    this.conn = this.open(undefined);
  }

  /** Subscribes `channel` on the current node; resolves once the node confirmed it. */
  async subscribe(channel: string): Promise<void> {
    this.channels.add(channel);
    // Without a connection the channel is subscribed once one is made; this waiter learns
    // that now and waits by its timers meanwhile.
    if (this.conn === undefined) throw new Error('no Redis Cluster node to subscribe on');
    await this.conn.subscribe(channel);
  }

  async unsubscribe(channel: string): Promise<void> {
    this.channels.delete(channel);
    await this.conn?.unsubscribe(channel);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.conn?.disconnect();
  }

  private open(previous: string | undefined): RedisNodeClient | undefined {
    const nodes = this.cluster.nodes('all');
    const others = nodes.filter((n) => nodeName(n) !== previous);
    const candidates = others.length > 0 ? others : nodes;
    const from = candidates[Math.floor(Math.random() * candidates.length)];
    if (from === undefined) {
      // The client knows no node right now (its slot map is being rebuilt): try again.
      this.retry(previous);
      return undefined;
    }
    const base = this.cluster.options.redisOptions ?? {};
    const conn = openNodeClient({
      host: from.options.host ?? '127.0.0.1',
      port: from.options.port ?? 6379,
      ...(base.username === undefined ? {} : { username: base.username }),
      ...(base.password === undefined ? {} : { password: base.password }),
      ...(base.tls === undefined ? {} : { tls: base.tls }),
      connectionName: CONNECTION_NAME,
      // No reconnects to the same node: a node that went away is left for another one.
      retryStrategy: () => null,
      maxRetriesPerRequest: 1,
    });
    const moved = this.opened++ > 0;
    conn.on('message', (channel: string, message: string) => this.events.message(channel, message));
    conn.on('error', (err: unknown) => {
      this.logger.debug({ err: String(err) }, 'redis release subscriber error');
    });
    conn.once('ready', () => {
      this.failures = 0;
      const channels = [...this.channels];
      if (!moved) return;
      const again = channels.length === 0 ? Promise.resolve() : conn.subscribe(...channels);
      again.then(
        () => {
          if (!this.closed && this.conn === conn) this.events.resubscribed();
        },
        (err: unknown) => {
          this.logger.warn({ err: String(err) }, 'redis release subscriber: resubscribe failed');
          conn.disconnect();
        },
      );
    });
    conn.once('end', () => {
      if (this.closed || this.conn !== conn) return;
      this.retry(nodeName(conn));
    });
    return conn;
  }

  /** Opens a connection to another node than `previous`, soon. */
  private retry(previous: string | undefined): void {
    // The first move is at once (releases are being missed); a cluster with no reachable
    // node is retried with a growing delay.
    const delay = this.failures === 0 ? 0 : Math.min(MAX_BACKOFF_MS, 50 * 2 ** this.failures);
    this.failures++;
    this.conn = undefined;
    this.timer = setTimeout(() => {
      if (this.closed) return;
      this.logger.info({ from: previous }, 'redis release subscriber moves to another node');
      this.conn = this.open(previous);
    }, delay);
    this.timer.unref();
  }
}

function nodeName(n: RedisNodeClient): string {
  return `${n.options.host ?? ''}:${n.options.port ?? 0}`;
}
