import { WakeLines } from '../../core/runtime/wake-lines.js';
import type { SqliteDatabase } from './client.js';
import { closeSync, futimesSync, openSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';

/**
 * Wake-ups for waiters on one SQLite file, shared by every store instance in this process
 * that opened it. Writes from this process notify the key directly. Other processes touch a
 * sidecar file (`<db>-notify`) *after* each release or grant has committed, and this feed
 * watches it (inotify). Watching the WAL itself would be wrong: SQLite writes WAL frames
 * before the commit becomes visible to readers (the wal-index in `-shm` is updated through
 * mmap, which raises no event), so a waiter woken by the WAL write can re-read the old state
 * and then sleep through the release. The sidecar cannot say which key changed, so every
 * waiter on the file re-checks — a read, which costs no write.
 *
 * This process's own touches come back as events too. Those are skipped: each store using the
 * feed says whether another connection has committed to the file since it last looked
 * (SQLite's `data_version`), and only then does an event wake everyone. A foreign process
 * touches the sidecar after its commit, so when its event arrives that commit is already
 * visible to the check (decision 030). Measured before, 100 `LeaseClient`s waiting on one key
 * of one store: every change of holder woke each waiter three times (289 reads per grant, 189
 * grants/s; 99 reads and 363/s with the watcher off).
 */
/** What a listener is told: `'granted'` when the key's last committed write granted it. */
type Listener = (change?: 'granted') => void;

/**
 * Whether another connection may have committed to the file since the last call (each store's
 * own connection asks SQLite's `data_version`). Throwing counts as yes.
 */
export type ForeignCommits = () => boolean;

/**
 * The {@link ForeignCommits} of one connection: SQLite's `data_version` changes only with other
 * connections' commits, so the feed skips the sidecar events of this process's own touches by
 * it (decision 030).
 */
export function foreignCommitsOf(db: Pick<SqliteDatabase, 'pragma'>): ForeignCommits {
  const dataVersion = (): unknown => db.pragma('data_version', { simple: true });
  let seenVersion = dataVersion();
  return () => {
    const now = dataVersion();
    const changed = now !== seenVersion;
    seenVersion = now;
    return changed;
  };
}

const NONE: ReadonlySet<string> = new Set();

class ChangeFeed {
  // Every watcher of a key is woken ('all'), after the current operation, as a commit's
  // announcement would reach it: SQLite's waiters are few per process (one file, one writer).
  private readonly byKey = new WakeLines('all');
  private watcher: FSWatcher | undefined;
  private refs = 0;
  private scheduled = false;
  private readonly notifyPath: string;
  private notifyFd: number | undefined;
  private readonly probes = new Set<ForeignCommits>();

  constructor(private readonly path: string) {
    this.notifyPath = `${path}-notify`;
  }

  /**
   * Tells this process's listeners and other processes that something on `key` committed.
   * Call after the commit. `'granted'`: the key's last write granted it, so it is held (this
   * process's waiters need not look; other processes cannot be told which, and look).
   */
  announce(key: string, change?: 'granted'): void {
    this.announceAll([key], change === 'granted' ? new Set([key]) : NONE);
  }

  /**
   * {@link announce} for several keys that committed together: one touch of the sidecar.
   * `granted`: those of `keys` whose last write in the commit granted them.
   */
  announceAll(keys: readonly string[], granted: ReadonlySet<string> = NONE): void {
    if (keys.length === 0) return;
    for (const key of keys) this.notifyKey(key, granted.has(key) ? 'granted' : undefined);
    try {
      if (this.notifyFd === undefined) this.notifyFd = openSync(this.notifyPath, 'a');
      const now = new Date();
      futimesSync(this.notifyFd, now, now);
    } catch {
      // A read-only directory or a vanished file: waiters elsewhere fall back to timers.
    }
  }

  retain(foreign?: ForeignCommits): void {
    this.refs++;
    if (foreign !== undefined) this.probes.add(foreign);
  }

  /** Returns true when nobody uses the feed any more. */
  releaseRef(foreign?: ForeignCommits): boolean {
    if (foreign !== undefined) this.probes.delete(foreign);
    this.refs--;
    if (this.refs <= 0) {
      this.watcher?.close();
      this.watcher = undefined;
      if (this.notifyFd !== undefined) closeSync(this.notifyFd);
      this.notifyFd = undefined;
      return true;
    }
    return false;
  }

  subscribe(key: string, listener: Listener): () => void {
    this.ensureWatcher();
    return this.byKey.add(key, (change) => queueMicrotask(() => listener(change)));
  }

  notifyKey(key: string, change?: 'granted'): void {
    if (change === 'granted') this.byKey.granted(key);
    else this.byKey.released(key);
  }

  private notifyAll(): void {
    if (this.scheduled || this.byKey.size === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.byKey.recheckAll();
    });
  }

  /**
   * Whether any store on the feed saw another connection's commit since it last looked. Every
   * probe is asked (each remembers what it saw); with none registered, assume yes.
   */
  private foreignCommits(): boolean {
    if (this.probes.size === 0) return true;
    let seen = false;
    for (const probe of this.probes) {
      try {
        if (probe()) seen = true;
      } catch {
        seen = true;
      }
    }
    return seen;
  }

  private ensureWatcher(): void {
    if (this.watcher !== undefined) return;
    const sidecar = basename(this.notifyPath);
    try {
      this.watcher = watch(dirname(this.path), { persistent: false }, (_event, filename) => {
        if ((filename === null || filename === sidecar) && this.foreignCommits()) this.notifyAll();
      });
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch {
      // No file-system notifications here (some network file systems): waiters fall back to
      // the holder's expiry timer and the client's poll.
      this.watcher = undefined;
    }
  }
}

const feeds = new Map<string, ChangeFeed>();

/**
 * The process-wide change feed for the database file at `path` (an absolute path). `foreign`
 * lets the feed skip the sidecar events of this process's own touches (see ChangeFeed).
 */
export function retainChangeFeed(path: string, foreign?: ForeignCommits): ChangeFeed {
  let feed = feeds.get(path);
  if (feed === undefined) feeds.set(path, (feed = new ChangeFeed(path)));
  feed.retain(foreign);
  return feed;
}

export function releaseChangeFeed(path: string, feed: ChangeFeed, foreign?: ForeignCommits): void {
  if (feed.releaseRef(foreign) && feeds.get(path) === feed) feeds.delete(path);
}

export type { ChangeFeed };
