/**
 * Serialises work per fencing scope inside one process: at most one task of a scope runs at
 * a time, in arrival order, and at most `maxWaiting` wait behind it. Different scopes run in
 * parallel. This is what keeps a token-41 request that was already accepted from racing a
 * later token-42 request to the destination.
 */
export class ScopeQueue {
  private readonly tails = new Map<string, { tail: Promise<void>; size: number }>();
  private count = 0;

  /** Tasks queued or running, over every scope. */
  get total(): number {
    return this.count;
  }

  constructor(readonly maxWaiting: number) {}

  /** Tasks of `scope` queued or running. */
  size(scope: string): number {
    return this.tails.get(scope)?.size ?? 0;
  }

  /**
   * Runs `task` once every earlier task of `scope` has finished. Returns undefined at once,
   * without running it, when `maxWaiting` tasks already wait (the caller answers "busy").
   */
  run<T>(scope: string, task: () => Promise<T>): Promise<T> | undefined {
    let entry = this.tails.get(scope);
    if (entry !== undefined && entry.size > this.maxWaiting) return undefined;
    // Nothing of this scope is queued or running: the task starts now (no wait on a
    // resolved promise, one microtask less on the uncontended path).
    const before = entry?.tail;
    if (entry === undefined) {
      entry = { tail: Promise.resolve(), size: 0 };
      this.tails.set(scope, entry);
    }
    const e = entry;
    e.size++;
    this.count++;
    let done!: () => void;
    const mine = new Promise<void>((r) => (done = r));
    e.tail = mine;
    return (async () => {
      if (before !== undefined) await before;
      try {
        return await task();
      } finally {
        e.size--;
        this.count--;
        done();
        if (e.size === 0 && this.tails.get(scope) === e) this.tails.delete(scope);
      }
    })();
  }
}
