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
    const found = this.tails.get(scope);
    if (found !== undefined && found.size > this.maxWaiting) return undefined;
    let e = found;
    if (e === undefined) {
      e = { tail: DONE, size: 0 };
      this.tails.set(scope, e);
    }
    e.size++;
    this.count++;
    let result: Promise<T>;
    if (found === undefined) {
      // Nothing of this scope is queued or running: the task starts now, in this tick.
      try {
        result = task();
      } catch (err) {
        result = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    } else result = e.tail.then(task);
    // The tail settles (never rejects) when this task is over; the bookkeeping below is
    // attached first, so it runs before the next task of the scope starts.
    const over = result.then(NOOP, NOOP);
    const entry = e;
    entry.tail = over;
    void over.then(() => {
      entry.size--;
      this.count--;
      if (entry.size === 0 && this.tails.get(scope) === entry) this.tails.delete(scope);
    });
    return result;
  }
}

const NOOP = (): void => undefined;
const DONE: Promise<void> = Promise.resolve();
