import type { Settled } from './request.js';
import type { Unwatch } from './store.js';
import type { Wakeup } from './wakeup.js';

/**
 * The parked acquisitions of one client on one key, in arrival order. They share one store
 * subscription, and a store notification wakes only the head: when 32 tasks of one process
 * wait for a hot key, a release costs one re-check at the store, not 32 (no thundering herd).
 * The others move up as the head leaves — acquired, timed out or aborted — and the new head
 * is woken then, so no notification is lost.
 */
export class KeyWaiters {
  private readonly parked: Wakeup[] = [];
  private subscription: Promise<Settled<Unwatch>> | undefined;
  private unwatch: Unwatch | undefined;

  constructor(private readonly onEmpty: () => void) {}

  /** Wakes the first parked waiter; given to the store as the watch callback. */
  readonly notifyHead = (): void => {
    this.parked[0]?.notify();
  };

  join(wakeup: Wakeup): void {
    this.parked.push(wakeup);
  }

  isHead(wakeup: Wakeup): boolean {
    return this.parked[0] === wakeup;
  }

  /**
   * Subscribes once for every waiter on the key (the first caller starts it, the others
   * await the same subscription). A failed subscription is retried by the next joiner.
   */
  subscribe(start: () => Promise<Settled<Unwatch>>): Promise<Settled<Unwatch>> {
    if (this.subscription === undefined) {
      const pending = start().then((settled) => {
        if (settled.ok) {
          if (this.parked.length === 0) settled.value();
          else this.unwatch = settled.value;
        } else if (this.subscription === pending) {
          this.subscription = undefined;
        }
        return settled;
      });
      this.subscription = pending;
    }
    return this.subscription;
  }

  /** Leaves the queue; `acquired` says the key is now ours, so nobody else needs a re-check. */
  leave(wakeup: Wakeup, acquired = false): void {
    const at = this.parked.indexOf(wakeup);
    if (at < 0) return;
    this.parked.splice(at, 1);
    if (this.parked.length === 0) {
      this.unwatch?.();
      this.unwatch = undefined;
      this.subscription = undefined;
      this.onEmpty();
    } else if (at === 0 && !acquired) {
      // The head may have consumed a notification meant for whoever comes next.
      this.parked[0]!.notify();
    }
  }
}
