/**
 * Listeners by key: what every store that wakes waiters keeps (the memory store, the
 * PostgreSQL LISTEN session, the SQLite change feed). A key is kept only while it has a
 * listener, so a store can tell which keys anyone waits on; the lists handed out are copies,
 * so a listener may add or remove listeners while it is called.
 */
export class KeyedListeners<L> {
  private readonly byKey = new Map<string, Set<L>>();

  /** Adds `listener` for `key`; the function returned removes it (once is enough). */
  add(key: string, listener: L): () => void {
    let set = this.byKey.get(key);
    if (set === undefined) this.byKey.set(key, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.byKey.get(key) === set) this.byKey.delete(key);
    };
  }

  /** The listeners of `key` now, or undefined when it has none. */
  of(key: string): L[] | undefined {
    const set = this.byKey.get(key);
    return set === undefined ? undefined : [...set];
  }

  /** Every listener now, of every key. */
  all(): L[] {
    const out: L[] = [];
    for (const set of [...this.byKey.values()]) for (const fn of set) out.push(fn);
    return out;
  }

  /** Whether `key` has a listener. */
  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** The keys with a listener now. */
  keys(): string[] {
    return [...this.byKey.keys()];
  }

  /** How many keys have a listener. */
  get size(): number {
    return this.byKey.size;
  }

  /** Forgets every listener. */
  clear(): void {
    this.byKey.clear();
  }
}
