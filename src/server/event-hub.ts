/** The kinds of events on the server's stream. The strings match results and metric labels. */
export type ServerEventType =
  /** A lease was granted through this server. */
  | 'acquired'
  /** A lease was renewed through this server. */
  | 'renewed'
  /** A lease was released through this server. */
  | 'released'
  /**
   * A lease granted through this server is gone for good: the store refused its holder's
   * renewal (same lease id and token). Refused renewals with another lease id or token are
   * not events.
   */
  | 'lost'
  /** Best effort: a lease granted here ran out without a release (its holder vanished). */
  | 'expired'
  /**
   * The store reported that the key may have changed (only on streams for one exact key): it is
   * free now (no `token`), or held by a holder the stream had not told of (`token`).
   */
  | 'changed'
  /** A fence at a protected resource decided a write with a token of this key (reported to the server). */
  | 'fence'
  /**
   * A fence installed (or refused to install) a token of this key before its holder's first
   * write — a claim before start, at acquisition or by hand (reported to the server).
   * `result` is `applied` or `stale_fence`; `scope` is always set.
   */
  | 'claim';

/** One event on the stream. Tokens are decimal strings; lease ids appear only as 8-char prefixes. */
export interface ServerEvent {
  readonly seq: number;
  readonly type: ServerEventType;
  readonly key: string;
  readonly token?: string;
  readonly ownerId?: string;
  readonly leaseIdPrefix?: string;
  readonly ttlMs?: number;
  /**
   * `acquired` events of a grant that reserved a token block (decision 007): its size. The
   * holder's local successors use `token + 1 … token + tokenBlock − 1` without the server
   * seeing them, and the next grant's token is at least `token + tokenBlock`.
   */
  readonly tokenBlock?: number;
  /** `fence` and `claim` events: the fence's answer (`applied`, `duplicate`, `stale_fence`). */
  readonly result?: 'applied' | 'duplicate' | 'stale_fence';
  /** `fence` events: the fencing scope, when it is not the key itself. */
  readonly scope?: string;
  /** `fence` events: the protected resource's name, as its reporter gave it. */
  readonly resource?: string;
  /** `fence` events with `stale_fence`: the high-water mark that refused the token. */
  readonly highWaterMark?: string;
  /** `fence` events: the name of the bearer token that reported it (`anonymous` without auth). */
  readonly reportedBy?: string;
  /**
   * `lost` events: set when the store ended the lease because it changed incarnation — a
   * failover or a restore — and raised its token epoch (decision 042).
   */
  readonly reason?: 'failover' | 'restore';
  /** Wall-clock ms when the server saw it, for display only. */
  readonly at: number;
}

/** Which events a subscriber wants: every key under `prefix`, or one exact `key`. */
export interface EventFilter {
  readonly prefix?: string;
  readonly key?: string;
  /** Further restriction, e.g. the keys a bearer token may read. */
  readonly allow?: (key: string) => boolean;
}

type Listener = (event: ServerEvent) => void;

interface Subscriber {
  readonly filter: EventFilter;
  readonly listener: Listener;
}

/** How many recent events the server keeps for `GET /v1/events/recent` (oldest dropped first). */
export const EVENT_HISTORY_SIZE = 500;

/**
 * Fans events out to subscribers by key prefix, and keeps the last {@link EVENT_HISTORY_SIZE}
 * published events in a ring buffer (memory bounded by the count; each event is small), so a
 * page that opens late can show what just happened. Delivery is in publish order per subscriber
 * and best effort: a slow stream drops itself (see the SSE writer), never slows a grant.
 * Streams for one exact key (every waiting `leasehold/http` client has one) are found by key,
 * so an event costs nothing for the streams of other keys.
 */
export class EventHub {
  private seq = 0;
  private readonly byKey = new Map<string, Set<Subscriber>>();
  private readonly byPrefix = new Set<Subscriber>();
  private count = 0;
  private readonly history: (ServerEvent | undefined)[];
  private next = 0;

  /**
   * `onPublish` sees the type of every published event (metrics); `historySize` is how many
   * recent events to keep (0 keeps none). Defaults to {@link EVENT_HISTORY_SIZE}.
   */
  constructor(
    private readonly onPublish: (type: ServerEventType) => void = () => {},
    historySize: number = EVENT_HISTORY_SIZE,
  ) {
    this.history = new Array<ServerEvent | undefined>(Math.max(0, Math.floor(historySize)));
  }

  /** How many recent events are kept at most. */
  get historySize(): number {
    return this.history.length;
  }

  /**
   * The kept events that match `filter`, oldest first, at most `limit` (the newest ones).
   * Events published before the last {@link historySize} are gone.
   */
  recent(filter: EventFilter, limit: number = this.history.length): ServerEvent[] {
    const out: ServerEvent[] = [];
    const n = this.history.length;
    for (let i = 0; i < n && out.length < limit; i++) {
      const e = this.history[(this.next - 1 - i + n) % n];
      if (e === undefined) break;
      if (filter.key !== undefined ? e.key !== filter.key : !e.key.startsWith(filter.prefix ?? ''))
        continue;
      if (filter.allow !== undefined && !filter.allow(e.key)) continue;
      out.push(e);
    }
    return out.reverse();
  }

  get size(): number {
    return this.count;
  }

  /** Numbers and timestamps an event without publishing it (for one subscriber's own stream). */
  stamp(event: Omit<ServerEvent, 'seq' | 'at'>): ServerEvent {
    return { ...event, seq: ++this.seq, at: Date.now() };
  }

  /** Numbers an event and hands it to every matching subscriber. */
  publish(event: Omit<ServerEvent, 'seq' | 'at'>): void {
    this.onPublish(event.type);
    const exact = this.byKey.get(event.key);
    if (exact === undefined && this.byPrefix.size === 0 && this.history.length === 0) {
      this.seq++; // seq counts every event, listened to or not
      return;
    }
    const full = this.stamp(event);
    if (this.history.length > 0) {
      this.history[this.next] = full;
      this.next = (this.next + 1) % this.history.length;
    }
    if (exact !== undefined) for (const s of exact) deliver(s, full);
    for (const s of this.byPrefix) {
      if (full.key.startsWith(s.filter.prefix ?? '')) deliver(s, full);
    }
  }

  subscribe(filter: EventFilter, listener: Listener): () => void {
    const entry: Subscriber = { filter, listener };
    const key = filter.key;
    let set: Set<Subscriber>;
    if (key === undefined) set = this.byPrefix;
    else {
      set = this.byKey.get(key) ?? new Set();
      this.byKey.set(key, set);
    }
    set.add(entry);
    this.count++;
    return () => {
      if (!set.delete(entry)) return;
      this.count--;
      if (key !== undefined && set.size === 0 && this.byKey.get(key) === set)
        this.byKey.delete(key);
    };
  }
}

function deliver(s: Subscriber, event: ServerEvent): void {
  if (s.filter.allow !== undefined && !s.filter.allow(event.key)) return;
  s.listener(event);
}
