import { WakeLines } from '../../core/runtime/wake-lines.js';
import { randomUUID } from 'node:crypto';
import type * as PgModule from 'pg';
import { LeaseholdError } from '../../core/errors.js';
import type { Unwatch, WatchChange } from '../../core/store.js';
import { quoteIdent, type PgConnectionConfig } from '../../drivers/postgres/client.js';
import { pg } from '../../drivers/postgres/driver.js';
import { unavailable } from '../../drivers/postgres/errors.js';
import { GRANT_NOTICE } from './queries.js';

/** Reconnect delays after the listening session is lost: doubling, capped. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5000;
/** How long one registration of interest in a key lasts at the database. */
export const INTEREST_TTL_MS = 60_000;
/** While a key is watched its interest is written again this often (one statement for all). */
const INTEREST_REFRESH_MS = 20_000;
/** A new watcher of a key registered less than this long ago writes nothing. */
const INTEREST_REUSE_MS = 30_000;

/**
 * Writes interest rows for `keys` (REGISTER_INTEREST, one transaction) valid for `ttlMs`, and
 * with `forget` also removes long-expired ones. Resolves once committed.
 */
export type RegisterInterest = (
  listenerId: string,
  keys: readonly string[],
  ttlMs: number,
  forget: boolean,
) => Promise<void>;

/**
 * One LISTEN session per store, shared by all its watchers. Payloads are keys (a release, from
 * the table's trigger) or GRANT_NOTICE + key (a grant, from the acquire statement); a
 * notification wakes that key's watchers. Releases and grants notify only keys with live
 * interest (migration 0004), so before a watch resolves its key is registered under this
 * session's id — after the LISTEN is live, before the caller re-checks (decision 014). Keys
 * registered together go in one statement; a key registered recently writes nothing; watched
 * keys are registered again every INTEREST_REFRESH_MS, and a key whose registration may have
 * lapsed meanwhile is woken to re-check. When the session is lost it reconnects (with
 * backoff, while anyone watches), LISTENs again, registers every watched key again (a crash
 * empties the unlogged interest table), and then wakes every watcher: a release during the
 * gap sent no notification we could see, so everyone re-checks — a read, which costs no write.
 */
export class Listener {
  /** The watchers of each key: a release wakes the longest-waiting one and every observer. */
  private readonly byKey = new WakeLines('one');
  private client: PgModule.Client | undefined;
  private connecting: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_MIN_MS;
  private closed = false;
  /** Until when (performance.now() scale, conservatively) each key's interest is live. */
  private readonly registeredUntil = new Map<string, number>();
  /** Keys waiting to be registered in the next statement, and its outcome. */
  private batch: { keys: Set<string>; done: Promise<void> } | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  /** This session's id in the interest table. */
  readonly id = randomUUID();
  /** Times the session was (re)established; for tests and diagnostics. */
  connections = 0;
  /** Registration statements sent; for tests and diagnostics. */
  registrations = 0;
  /** Whether this session ever wrote interest rows (the store removes them when it closes). */
  hasRegistered = false;

  /**
   * @param ownBackends the backends of the store's own pool, when it has one: every
   *   statement they run is the store's, which reports its releases and grants itself
   *   ({@link changed}) as soon as they answer, so their notifications are not delivered a
   *   second time (decision 022)
   */
  constructor(
    private readonly config: PgConnectionConfig | undefined,
    private readonly channel: string,
    private readonly registerInterest: RegisterInterest,
    private readonly ownBackends?: ReadonlySet<number>,
  ) {}

  /**
   * A release (no `change`) or a grant (`'granted'`) of `key` made by this store's own
   * statement, which has committed and answered: wakes the key's watchers now, without
   * waiting for the notification to come round through the LISTEN session (decision 022).
   */
  changed(key: string, change?: WatchChange): void {
    this.wake(key, change);
  }

  /**
   * Adds a watcher for `key`; resolves once the LISTEN is live, so a re-check after this
   * resolves cannot miss a release. Rejects `ERR_UNAVAILABLE` when the session cannot be
   * established (the client then waits by expiry timer and poll).
   */
  async subscribe(
    key: string,
    onChange: (change?: WatchChange) => void,
    observer = false,
  ): Promise<Unwatch> {
    if (this.closed)
      throw new LeaseholdError('ERR_CLOSED', 'the PostgreSQL lease store was closed');
    const unwatch = this.byKey.add(key, onChange, observer);
    try {
      await this.ensureConnected();
      await this.interestIn(key);
    } catch (err) {
      unwatch();
      throw err;
    }
    this.refreshTimer ??= setInterval(() => void this.refresh(), INTEREST_REFRESH_MS);
    // Refreshing must not keep a process alive that has nothing else to do.
    this.refreshTimer.unref();
    return unwatch;
  }

  /** Registers interest in `key` unless a recent registration still holds. */
  private interestIn(key: string): Promise<void> {
    const until = this.registeredUntil.get(key);
    if (until !== undefined && until - performance.now() > INTEREST_REUSE_MS) {
      return Promise.resolve();
    }
    if (this.batch === undefined) {
      const keys = new Set<string>();
      // Keys asked for in the same turn of the event loop share one statement.
      const done = Promise.resolve().then(async () => {
        if (this.batch?.keys === keys) this.batch = undefined;
        await this.register([...keys], false);
      });
      this.batch = { keys, done };
    }
    this.batch.keys.add(key);
    return this.batch.done;
  }

  /** Writes interest rows for `keys`; answers when each key's previous registration ran out. */
  private async register(keys: readonly string[], forget: boolean): Promise<Map<string, number>> {
    const before = new Map(keys.map((k) => [k, this.registeredUntil.get(k) ?? 0]));
    const sentAt = performance.now();
    this.registrations++;
    this.hasRegistered = true;
    try {
      // Sorted, so that two listeners inserting rows for the same new keys cannot deadlock.
      await this.registerInterest(this.id, [...keys].sort(), INTEREST_TTL_MS, forget);
    } catch (err) {
      throw unavailable('PostgreSQL lease store: registering waiters', err);
    }
    for (const k of keys) this.registeredUntil.set(k, sentAt + INTEREST_TTL_MS);
    return before;
  }

  /**
   * Registers every watched key again; a key whose previous registration may have lapsed
   * before this one committed (a late timer, a failed refresh) is woken to re-check, since a
   * release in the gap notified nobody.
   */
  private async refresh(): Promise<void> {
    if (this.closed) return;
    const now = performance.now();
    for (const [k, until] of this.registeredUntil) {
      if (until <= now && !this.byKey.has(k)) this.registeredUntil.delete(k);
    }
    const keys = this.byKey.keys();
    if (keys.length === 0) {
      if (this.refreshTimer !== undefined) clearInterval(this.refreshTimer);
      this.refreshTimer = undefined;
      return;
    }
    try {
      const before = await this.register(keys, true);
      const doneAt = performance.now();
      for (const [k, until] of before) if (until <= doneAt) this.byKey.recheck(k);
    } catch {
      // The next refresh tries again; waiters poll meanwhile.
    }
  }

  /** Ends the session; later subscriptions throw `ERR_CLOSED`. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    if (this.refreshTimer !== undefined) clearInterval(this.refreshTimer);
    this.byKey.clear();
    this.registeredUntil.clear();
    const client = this.client;
    this.client = undefined;
    await this.connecting?.catch(() => undefined);
    await client?.end().catch(() => undefined);
  }

  private ensureConnected(): Promise<void> {
    if (this.client !== undefined) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    if (this.config === undefined) {
      throw new LeaseholdError(
        'ERR_UNAVAILABLE',
        'PostgreSQL lease store: no connection settings for the LISTEN session (pass listenConnection with a custom pool)',
      );
    }
    const client = new pg.Client({
      ...this.config,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      application_name: 'leasehold-listener',
    });
    let lost = false;
    const onLost = (): void => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    client.on('error', onLost);
    client.on('end', onLost);
    client.on('notification', (msg) => {
      if (msg.channel !== this.channel || msg.payload === undefined) return;
      // Sent by one of the store's own statements, whose answer already woke the watchers.
      if (this.ownBackends?.has(msg.processId) === true) return;
      if (msg.payload.startsWith(GRANT_NOTICE)) this.wake(msg.payload.slice(1), 'granted');
      else this.wake(msg.payload);
    });
    try {
      await client.connect();
      const pooled = await throughPooler(client);
      if (pooled !== undefined) throw pooled;
      await client.query(`LISTEN ${quoteIdent(this.channel)}`);
    } catch (err) {
      lost = true;
      await client.end().catch(() => undefined);
      throw unavailable('PostgreSQL lease store: LISTEN session', err);
    }
    if (this.closed || lost) {
      await client.end().catch(() => undefined);
      if (this.closed)
        throw new LeaseholdError('ERR_CLOSED', 'the PostgreSQL lease store was closed');
      throw new LeaseholdError(
        'ERR_UNAVAILABLE',
        'PostgreSQL lease store: LISTEN session lost while starting',
      );
    }
    this.client = client;
    this.connections++;
    this.retryMs = RETRY_MIN_MS;
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer !== undefined || this.byKey.size === 0) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closed || this.byKey.size === 0) return;
      this.ensureConnected().then(
        () => this.reregisterAndWake(),
        () => this.scheduleReconnect(),
      );
    }, delay);
    // Reconnecting must not keep a process alive that has nothing else to do.
    this.retryTimer.unref();
  }

  /** After a reconnect: interest again for every watched key (best effort), then re-checks. */
  private async reregisterAndWake(): Promise<void> {
    this.registeredUntil.clear();
    const keys = this.byKey.keys();
    if (keys.length > 0) await this.register(keys, false).catch(() => undefined);
    this.wakeAll();
  }

  private wake(key: string, change?: WatchChange): void {
    if (change === 'granted') this.byKey.granted(key);
    else this.byKey.released(key);
  }

  private wakeAll(): void {
    this.byKey.recheckAll();
  }
}

/**
 * Refuses a LISTEN session that reached PostgreSQL through a connection pooler. A pooler in
 * transaction mode (PgBouncer's `pool_mode = transaction`) hands the server connection to
 * other clients after each statement: the LISTEN stays on a connection we no longer hold and
 * its notifications are dropped without a word, so waiters would never be woken. A pooler
 * answers the startup with a backend key of its own, so the process id the connection
 * announced differs from the backend that runs our queries; a direct connection (or a plain
 * TCP proxy) passes the server's through. Session mode would work, but it looks the same
 * from here, so every pooler is refused and the error says what to do instead.
 */
async function throughPooler(client: PgModule.Client): Promise<LeaseholdError | undefined> {
  const announced = (client as PgModule.Client & { processID?: unknown }).processID;
  const row = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0];
  if (typeof announced !== 'number' || row === undefined || row.pid === announced) {
    return undefined;
  }
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `PostgreSQL lease store: LISTEN session: the connection goes through a connection pooler (PostgreSQL backend ${row.pid}, but the connection announced process ${announced}, as PgBouncer does); ` +
      'in transaction pooling mode (pool_mode = transaction) LISTEN notifications are silently lost, so leasehold does not listen through a pooler: ' +
      'set listenConnection to a direct connection to PostgreSQL (waiters fall back to polling until then)',
  );
}
