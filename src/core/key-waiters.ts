import type { AcquireAsk } from './client-context.js';
import type { Lease } from './lease.js';
import type { Settled } from './runtime/request.js';
import type { Unwatch, WatchChange } from './store.js';
import type { Wakeup } from './runtime/wakeup.js';

/** What a hand-off delivers to a waiter: a grant it can end if the waiter is gone. */
export interface Releasable {
  release(): Promise<unknown>;
}

/**
 * One parked acquisition. Besides its wake-up it carries the state of a hand-off to it,
 * which only this class changes: claimed by a releasing lease of the same client (or, in the
 * server, a release of the key), then a grant delivered (or nothing, when the hand-off
 * failed), taken by the waiting acquisition or, if it gave up meanwhile, released. `G` is
 * what is delivered (a `Lease` in the client), `A` what the acquisition asks for.
 */
export class Waiter<G extends Releasable = Lease, A extends AcquireAsk = AcquireAsk> {
  private claimedBy = false;
  private left = false;
  private delivered: G | undefined;
  private taken = false;

  /**
   * @param request what the acquisition asks for; a hand-off serves it with the same
   * @param startedAt when the acquisition began, on the client's monotonic clock
   */
  constructor(
    readonly wakeup: Wakeup,
    readonly request: A,
    readonly startedAt: number,
  ) {}

  /** A releasing lease of this client is handing the key to this waiter right now. */
  get claimed(): boolean {
    return this.claimedBy;
  }

  /** The waiter gave up (aborted, timed out, client closed). */
  get gone(): boolean {
    return this.left;
  }

  /** Called by {@link KeyWaiters.claimHead}. */
  claim(): boolean {
    if (this.claimedBy || this.left) return false;
    this.claimedBy = true;
    return true;
  }

  /** Gives back a claim; true when there was one. */
  unclaim(): boolean {
    const was = this.claimedBy;
    this.claimedBy = false;
    return was;
  }

  /**
   * Ends a hand-off to this waiter: `lease` if it got one (released at once if the waiter
   * is gone), and wakes it either way.
   */
  deliver(lease: G | undefined): void {
    this.claimedBy = false;
    if (lease !== undefined) {
      if (this.left) void lease.release();
      else this.delivered = lease;
    }
    this.wakeup.notify();
  }

  /** The lease a hand-off delivered, now the waiting acquisition's to return. */
  take(): G | undefined {
    if (this.delivered === undefined || this.taken) return undefined;
    this.taken = true;
    return this.delivered;
  }

  /** The waiter gives up: a lease delivered but not taken, or delivered later, is released. */
  abandon(): void {
    this.left = true;
    if (this.delivered !== undefined && !this.taken) void this.delivered.release();
  }
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
export class KeyWaiters<G extends Releasable = Lease, A extends AcquireAsk = AcquireAsk> {
  private readonly parked: Array<Waiter<G, A>> = [];
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

  /** How many are parked (the first of them is the head). */
  get size(): number {
    return this.parked.length;
  }

  join(waiter: Waiter<G, A>): void {
    this.parked.push(waiter);
  }

  isHead(waiter: Waiter<G, A>): boolean {
    return this.parked[0] === waiter;
  }

  /**
   * The head waiter, claimed for a direct hand-off, or undefined: nobody waits, the head is
   * already being served, or `maxRun` hand-offs happened in a row (the count restarts, and
   * this release goes to everyone).
   */
  claimHead(maxRun: number): Waiter<G, A> | undefined {
    const head = this.parked[0];
    if (head === undefined || head.claimed || head.gone) return undefined;
    if (this.handOffRun >= maxRun) {
      this.handOffRun = 0;
      return undefined;
    }
    this.handOffRun++;
    head.claim();
    return head;
  }

  /** Gives back a claim {@link claimHead} made when no hand-off could be done after all. */
  unclaim(waiter: Waiter<G, A>): void {
    if (waiter.unclaim() && this.handOffRun > 0) this.handOffRun--;
  }

  /**
   * Whether the store would wake another of its waiters of the key before this queue's
   * (another client's, on the same store object): this queue's turn then comes by a wake-up.
   */
  queuedBehindAtStore(): boolean {
    return this.unwatch?.queuedBehind?.() === true;
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
  leave(waiter: Waiter<G, A>, acquired = false): void {
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

/** The queues of parked acquisitions of one client (or one server), by key. */
export class WaitQueues<G extends Releasable = Lease, A extends AcquireAsk = AcquireAsk> {
  private readonly byKey = new Map<string, KeyWaiters<G, A>>();

  /** How many wait, for any key. */
  get size(): number {
    let n = 0;
    for (const q of this.byKey.values()) n += q.size;
    return n;
  }

  /** The queue of `key`, if anyone waits for it. */
  get(key: string): KeyWaiters<G, A> | undefined {
    return this.byKey.get(key);
  }

  /** Parks `waiter` at the end of the queue of `key` (made on first use, dropped when empty). */
  join(key: string, waiter: Waiter<G, A>): KeyWaiters<G, A> {
    let queue = this.byKey.get(key);
    if (queue === undefined) {
      const created = new KeyWaiters<G, A>(() => {
        if (this.byKey.get(key) === created) this.byKey.delete(key);
      });
      this.byKey.set(key, created);
      queue = created;
    }
    queue.join(waiter);
    return queue;
  }
}
