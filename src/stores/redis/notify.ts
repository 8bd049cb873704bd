import type { Logger } from '../../core/events.js';
import type { Unwatch, WatchChange } from '../../core/store.js';
import { ClusterSubscription } from './cluster-subscription.js';
import { isCluster, type RedisClient, type RedisNodeClient } from '../../drivers/redis/client.js';

interface Watcher {
  readonly onChange: (change?: WatchChange) => void;
  /** Told of every release; never the one waiter a release wakes (see WatchOptions). */
  readonly observer: boolean;
  /** Woken by a release and has not yet left: it passes the wake-up on when it leaves. */
  baton: boolean;
}

interface Channel {
  readonly watchers: Set<Watcher>;
  readonly subscribed: Promise<unknown>;
  /** Whether the key may be free: a release was seen and no grant through this store since. */
  mayBeFree: boolean;
}

/** How many local waiters one release wakes. */
export type WakeMode = 'one' | 'all';

/**
 * One pub/sub connection per store, shared by every waiter on every key. A release publishes
 * on the key's channel; this connection turns that into wake-ups. A grant publishes
 * 'granted' there too, told to every watcher of the key as `'granted'`.
 *
 * With `wake: 'one'` a release wakes one local waiter per key, the longest-waiting one, not
 * the whole herd, and every observer (`WatchOptions.observer`: election observers, the
 * server's event streams), which never acquire on a wake-up and so would keep the wake-up
 * from the waiters. A woken waiter that finds the key taken (a caller that did not wait got
 * there first) stays at the head of the line for the next release, so waiters are served in
 * arrival order. A woken waiter that leaves while the key may still be free (it gave up,
 * timed out or failed — no grant through this store since the release) passes the wake-up to
 * the next, so no wake-up is lost. The client's timer at the holder's expiry and its poll
 * stay as backstops. `'all'` wakes every waiter.
 *
 * After a reconnect every waiter is woken, since releases published while the connection
 * was down were not seen: on one node (standalone, Sentinel) ioredis re-subscribes by itself
 * and this runs on its `'ready'`; on a Cluster the subscription is a {@link ClusterSubscription},
 * which moves to another node when its node goes away and says when it has.
 */
export class ReleaseSubscriber {
  private readonly channels = new Map<string, Channel>();
  private readonly sub: PubSubLink;

  constructor(
    base: RedisClient,
    private readonly wake: WakeMode,
    private readonly logger: Logger,
  ) {
    const events = {
      message: (channel: string, message: string) => this.onMessage(channel, message),
      resubscribed: () => this.wakeEveryone(),
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
    let entry = this.channels.get(channel);
    if (entry === undefined) {
      entry = { watchers: new Set(), subscribed: this.sub.subscribe(channel), mayBeFree: false };
      this.channels.set(channel, entry);
    }
    const watcher: Watcher = { onChange, observer, baton: false };
    entry.watchers.add(watcher);
    const owner = entry;
    try {
      await owner.subscribed;
    } catch (err) {
      this.remove(channel, owner, watcher);
      throw err;
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.remove(channel, owner, watcher);
    };
  }

  /** Records a grant through this store: a woken waiter that leaves now need not wake another. */
  noteGranted(channel: string): void {
    const entry = this.channels.get(channel);
    if (entry !== undefined) entry.mayBeFree = false;
  }

  async close(): Promise<void> {
    this.channels.clear();
    this.sub.close();
    await Promise.resolve();
  }

  private remove(channel: string, entry: Channel, watcher: Watcher): void {
    if (!entry.watchers.delete(watcher)) return;
    if (watcher.baton && entry.mayBeFree) this.wakeNext(entry);
    if (entry.watchers.size === 0 && this.channels.get(channel) === entry) {
      this.channels.delete(channel);
      this.sub.unsubscribe(channel).catch(() => undefined);
    }
  }

  private onMessage(channel: string, message: string): void {
    const entry = this.channels.get(channel);
    if (entry === undefined) return;
    if (message === 'granted') {
      // A grant, by any process: the key is held. Everyone hears of it (observers need it;
      // waiters ignore it), and no baton moves.
      entry.mayBeFree = false;
      for (const w of entry.watchers) call(w, 'granted');
      return;
    }
    entry.mayBeFree = true;
    if (this.wake === 'all') {
      for (const w of entry.watchers) call(w);
      return;
    }
    for (const w of entry.watchers) if (w.observer) call(w);
    this.wakeNext(entry);
  }

  private wakeNext(entry: Channel): void {
    // The longest-waiting waiter (observers aside), which keeps its place until it leaves.
    for (const w of entry.watchers) {
      if (w.observer) continue;
      w.baton = true;
      call(w);
      return;
    }
  }

  private wakeEveryone(): void {
    for (const entry of this.channels.values()) for (const w of entry.watchers) call(w);
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

function call(w: Watcher, change?: WatchChange): void {
  try {
    if (change === undefined) w.onChange();
    else w.onChange(change);
  } catch {
    // A waiter's callback only schedules a retry; it has nothing to report here.
  }
}
