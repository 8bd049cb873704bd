import type { Lease } from './lease.js';
import type { Settled } from './request.js';
import type { Unwatch, WatchChange } from './store.js';
import type { Wakeup } from './wakeup.js';

/** What a releasing lease needs to know to hand its key straight to a waiter. */
export interface HandOffRequest {
  readonly key: string;
  readonly ttlMs: number;
  readonly driftMs: number;
  readonly renewEveryMs: number | undefined;
  readonly value: string | undefined;
}

/** One parked acquisition. */
export class Waiter {
  /** A releasing lease of this client is handing the key to this waiter right now. */
  claimed = false;
  /** The waiter gave up (aborted, timed out, client closed): a hand-off arriving later is released. */
  gone = false;
  /** The lease a hand-off delivered; the waiter returns it. */
  lease: Lease | undefined;

  constructor(
    readonly wakeup: Wakeup,
    readonly request: HandOffRequest,
    readonly startedAt: number,
  ) {}
}

/**
 * The parked acquisitions of one client on one key, in arrival order. They share one store
 * subscription, and a store notification wakes only the head: when 32 tasks of one process
 * wait for a hot key, a release costs one re-check at the store, not 32 (no thundering herd).
 * The others move up as the head leaves — acquired, timed out or aborted — and the new head
 * is woken then, so no notification is lost.
 *
 * A lease of the same client that is released while waiters are parked may hand the key to
 * the head directly ({@link claimHead}); at most `maxRun` times in a row, then one ordinary
 * release lets waiters in other processes compete.
 */
export class KeyWaiters {
  private readonly parked: Waiter[] = [];
  private subscription: Promise<Settled<Unwatch>> | undefined;
  private unwatch: Unwatch | undefined;
  private handOffRun = 0;

  constructor(private readonly onEmpty: () => void) {}

  /**
   * Wakes the first parked waiter; given to the store as the watch callback. A grant leaves
   * the key held: it wakes nobody (a waiter would only be told busy again).
   */
  readonly notifyHead = (change?: WatchChange): void => {
    if (change === 'granted') return;
    this.parked[0]?.wakeup.notify();
  };

  join(waiter: Waiter): void {
    this.parked.push(waiter);
  }

  isHead(waiter: Waiter): boolean {
    return this.parked[0] === waiter;
  }

  /**
   * The head waiter, claimed for a direct hand-off, or undefined: nobody waits, the head is
   * already being served, or `maxRun` hand-offs happened in a row (the count restarts, and
   * this release goes to everyone).
   */
  claimHead(maxRun: number): Waiter | undefined {
    const head = this.parked[0];
    if (head === undefined || head.claimed || head.gone) return undefined;
    if (this.handOffRun >= maxRun) {
      this.handOffRun = 0;
      return undefined;
    }
    this.handOffRun++;
    head.claimed = true;
    return head;
  }

  /** Gives back a claim {@link claimHead} made when no hand-off could be done after all. */
  unclaim(waiter: Waiter): void {
    if (!waiter.claimed) return;
    waiter.claimed = false;
    if (this.handOffRun > 0) this.handOffRun--;
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
  leave(waiter: Waiter, acquired = false): void {
    const at = this.parked.indexOf(waiter);
    if (at < 0) return;
    this.parked.splice(at, 1);
    if (this.parked.length === 0) {
      this.unwatch?.();
      this.unwatch = undefined;
      this.subscription = undefined;
      this.onEmpty();
    } else if (at === 0 && !acquired) {
      // The head may have consumed a notification meant for whoever comes next.
      this.parked[0]!.wakeup.notify();
    }
  }
}
