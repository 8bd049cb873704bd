/**
 * What a watcher is told: `'granted'` when the key was granted (it is held), nothing when it
 * may be free. The same values as the store contract's `Change`, which lives a layer up.
 */
type Change = 'granted';

/** How many local waiters of a key one release wakes. */
export type WakeMode = 'one' | 'all';

/** One watcher of a key: a waiter (may acquire when woken) or an observer (never does). */
interface Watcher {
  readonly onChange: (change?: Change) => void;
  readonly observer: boolean;
  /** Woken for a release and not yet gone: the next release's wake-up is its again. */
  baton: boolean;
}

/** A key's watchers in arrival order, and whether the key may be free since the last release. */
interface Line {
  readonly watchers: Set<Watcher>;
  mayBeFree: boolean;
}

/**
 * The local watchers of each key, woken by the store's release and grant notifications: what
 * every store that wakes waiters keeps. PostgreSQL's LISTEN session and Redis's release
 * subscriber, which hold many waiters per process, use `'one'`; SQLite's change feed and the
 * memory store use `'all'`.
 *
 * With `'one'` a release wakes one waiter per key, the longest-waiting, not the whole herd,
 * and every observer (election observers, the server's event streams), which never acquire
 * on a wake-up and so would keep the wake-up from the waiters. A woken waiter that finds the
 * key taken (a caller that did not wait got there first) stays at the head of the line for
 * the next release, so waiters are served in arrival order. A woken waiter that leaves while
 * the key may still be free (it gave up, timed out or failed — no grant seen since the
 * release) passes the wake-up on to the next, so no wake-up is lost. The client's timer at
 * the holder's expiry and its poll stay as backstops. `'all'` wakes every watcher.
 *
 * Measured with 1,000 waiters on one PostgreSQL key (four store connections): waking every
 * waiter cost 229 grant attempts per grant; `npm run bench -- --only scale` shows the figure
 * with one wake-up per release (docs/scale.md).
 */
export class WakeLines {
  private readonly lines = new Map<string, Line>();

  constructor(private readonly mode: WakeMode) {}

  /**
   * Adds a watcher of `key`; the function returned removes it (once is enough). Its
   * `queuedBehind` says whether a release would wake another waiter first (always false with
   * `'all'` and for observers).
   */
  add(
    key: string,
    onChange: (change?: Change) => void,
    observer = false,
  ): (() => void) & { readonly queuedBehind: () => boolean } {
    let line = this.lines.get(key);
    if (line === undefined) this.lines.set(key, (line = { watchers: new Set(), mayBeFree: false }));
    const watcher: Watcher = { onChange, observer, baton: false };
    line.watchers.add(watcher);
    const owner = line;
    let done = false;
    const remove = (): void => {
      if (done) return;
      done = true;
      if (!owner.watchers.delete(watcher)) return;
      if (watcher.baton && owner.mayBeFree) this.wakeNext(owner);
      if (owner.watchers.size === 0 && this.lines.get(key) === owner) this.lines.delete(key);
    };
    const queuedBehind = (): boolean =>
      this.mode === 'one' && !observer && !done && firstWaiter(owner) !== watcher;
    return Object.assign(remove, { queuedBehind });
  }

  /** The key may be free (a release, an expiry): wakes its waiter(s) and observers. */
  released(key: string): void {
    const line = this.lines.get(key);
    if (line === undefined) return;
    line.mayBeFree = true;
    if (this.mode === 'all') {
      for (const w of [...line.watchers]) call(w);
      return;
    }
    for (const w of [...line.watchers]) if (w.observer) call(w);
    this.wakeNext(line);
  }

  /** The key was granted, by any process: everyone hears of it, and no wake-up moves. */
  granted(key: string): void {
    const line = this.lines.get(key);
    if (line === undefined) return;
    line.mayBeFree = false;
    for (const w of [...line.watchers]) call(w, 'granted');
  }

  /**
   * A grant of `key` made through this store, whose answer its caller already has: no
   * watcher is told, but a woken waiter that leaves now need not pass its wake-up on.
   */
  noteGranted(key: string): void {
    const line = this.lines.get(key);
    if (line !== undefined) line.mayBeFree = false;
  }

  /**
   * Wakes every watcher of `key` to re-check, e.g. when a release may have gone unseen
   * (a lapsed registration): a re-check is a read, and only one of them can win.
   */
  recheck(key: string): void {
    const line = this.lines.get(key);
    if (line === undefined) return;
    for (const w of [...line.watchers]) call(w);
  }

  /** Wakes every watcher of every key (after a reconnect: releases may have been missed). */
  recheckAll(): void {
    for (const line of [...this.lines.values()]) for (const w of [...line.watchers]) call(w);
  }

  /** Whether `key` has a watcher. */
  has(key: string): boolean {
    return this.lines.has(key);
  }

  /** The keys with a watcher now. */
  keys(): string[] {
    return [...this.lines.keys()];
  }

  /** How many keys have a watcher. */
  get size(): number {
    return this.lines.size;
  }

  /** Forgets every watcher. */
  clear(): void {
    this.lines.clear();
  }

  private wakeNext(line: Line): void {
    // The longest-waiting waiter (observers aside), which keeps its place until it leaves.
    const w = firstWaiter(line);
    if (w === undefined) return;
    w.baton = true;
    call(w);
  }
}

/** The longest-waiting waiter of a line, observers aside (they come first only rarely). */
function firstWaiter(line: Line): Watcher | undefined {
  for (const w of line.watchers) if (!w.observer) return w;
  return undefined;
}

function call(w: Watcher, change?: Change): void {
  try {
    if (change === undefined) w.onChange();
    else w.onChange(change);
  } catch {
    // A watcher's callback only schedules a re-check; its failure is its own.
  }
}
