import type { Logger } from '../../core/events.js';
import { WakeLines, type WakeMode } from '../../core/runtime/wake-lines.js';
import type { Unwatch, WatchChange } from '../../core/store.js';
import { ClusterSubscription } from './cluster-subscription.js';
import { isCluster, type RedisClient, type RedisNodeClient } from '../../drivers/redis/client.js';

export type { WakeMode } from '../../core/runtime/wake-lines.js';

/**
 * One pub/sub connection per store, shared by every waiter on every key. A release publishes
 * on the key's channel; this connection turns that into wake-ups by the one wake-up rule of
 * the stores ({@link WakeLines}: with `'one'`, the longest-waiting local waiter of the key and
 * every observer). A grant publishes 'granted' there too, told to every watcher of the key.
 *
 * After a reconnect every waiter is woken, since releases published while the connection
 * was down were not seen: on one node (standalone, Sentinel) ioredis re-subscribes by itself
 * and this runs on its `'ready'`; on a Cluster the subscription is a {@link ClusterSubscription},
 * which moves to another node when its node goes away and says when it has.
 */
export class ReleaseSubscriber {
  /** Each watched channel's subscription, live at the server once it resolves. */
  private readonly subscriptions = new Map<string, Promise<unknown>>();
  private readonly lines: WakeLines;
  private readonly sub: PubSubLink;

  constructor(base: RedisClient, wake: WakeMode, logger: Logger) {
    this.lines = new WakeLines(wake);
    const events = {
      message: (channel: string, message: string) => this.onMessage(channel, message),
      resubscribed: () => this.lines.recheckAll(),
    };
    this.sub = isCluster(base)
      ? new ClusterSubscription(base, events, logger)
      : nodeLink(base, events, logger);
  }

  /** Registers `onChange` for `channel`; resolves once the subscription is live at the server. */
  async watch(
    channel: string,
    onChange: (change?: WatchChange) => void,
    observer = false,
  ): Promise<Unwatch> {
    let subscribed = this.subscriptions.get(channel);
    if (subscribed === undefined) {
      subscribed = this.sub.subscribe(channel);
      this.subscriptions.set(channel, subscribed);
    }
    const remove = this.lines.add(channel, onChange, observer);
    const unwatch = Object.assign(
      (): void => {
        remove();
        if (!this.lines.has(channel) && this.subscriptions.get(channel) === subscribed) {
          this.subscriptions.delete(channel);
          this.sub.unsubscribe(channel).catch(() => undefined);
        }
      },
      { queuedBehind: remove.queuedBehind },
    );
    try {
      await subscribed;
    } catch (err) {
      unwatch();
      throw err;
    }
    return unwatch;
  }

  /** Records a grant through this store: a woken waiter that leaves now need not wake another. */
  noteGranted(channel: string): void {
    this.lines.noteGranted(channel);
  }

  async close(): Promise<void> {
    this.lines.clear();
    this.subscriptions.clear();
    this.sub.close();
    await Promise.resolve();
  }

  private onMessage(channel: string, message: string): void {
    if (message === 'granted') this.lines.granted(channel);
    else this.lines.released(channel);
  }
}

/** The subscription connection: subscribe, unsubscribe, close. */
interface PubSubLink {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  close(): void;
}

/** The subscription on one node: a duplicate of the store's client, re-subscribed by ioredis. */
function nodeLink(
  base: RedisNodeClient,
  events: { message(channel: string, message: string): void; resubscribed(): void },
  logger: Logger,
): PubSubLink {
  const sub = base.duplicate();
  let connectedOnce = false;
  sub.on('message', (channel: string, message: string) => events.message(channel, message));
  sub.on('ready', () => {
    if (connectedOnce) events.resubscribed();
    connectedOnce = true;
  });
  sub.on('error', (err: unknown) => {
    logger.warn({ err: String(err) }, 'redis release subscriber error');
  });
  return {
    subscribe: (channel) => sub.subscribe(channel),
    unsubscribe: (channel) => sub.unsubscribe(channel),
    close: () => sub.disconnect(),
  };
}
