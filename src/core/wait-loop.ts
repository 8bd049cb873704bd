import type { AcquireAsk } from './client-context.js';
import type { Clock } from './runtime/clock.js';
import type { BusyAnswer } from './held-leases.js';
import { Waiter, type KeyWaiters, type Releasable, type WaitQueues } from './key-waiters.js';
import type { Lease } from './lease.js';
import type { Settled } from './runtime/request.js';
import { Wakeup } from './runtime/wakeup.js';
import type { Unwatch, WatchChange } from './store.js';

/** The outcome of one turn of a wait: an answer, busy, or an answer on its way another way. */
export type WaitTurn<R> =
  | { readonly kind: 'done'; readonly result: R; readonly acquired: boolean }
  | { readonly kind: 'busy'; readonly busy: BusyAnswer }
  /** A hand-off to this waiter is in flight; its outcome wakes the wait. */
  | { readonly kind: 'pending' };

/** One bounded wait for a key: what it asks, how it tries, and how it ends. */
export interface KeyWait<R, G extends Releasable = Lease, A extends AcquireAsk = AcquireAsk> {
  readonly ask: A;
  /** When the wait began and when it ends, on `now()`'s scale. */
  readonly startedAt: number;
  readonly until: number;
  readonly signal: AbortSignal;
  /** Where the waiters of each key queue; one per client (or server) and store. */
  readonly queues: WaitQueues<G, A>;
  /** Timers for the wake-ups. */
  readonly clock: Clock;
  now(): number;
  readonly random: () => number;
  /** The backstop poll while waiting (jittered ±20%). */
  readonly pollIntervalMs: number;
  /** How long to sleep while a hand-off is in flight (its outcome wakes us sooner). */
  readonly pendingMs: number;
  /** Subscribes to the store's changes of the key; `notify` wakes the head waiter. */
  watch(notify: (change?: WatchChange) => void): Promise<Settled<Unwatch>>;
  /** A watch that failed (not aborted): waiting goes on by expiry timer and poll. */
  watchFailed(error: unknown): void;
  /** One try: at the store, or a hand-off delivered to `waiter` (undefined before it parks). */
  turn(waiter: Waiter<G, A> | undefined): WaitTurn<R> | Promise<WaitTurn<R>>;
  /** The answer when the wait is over and the key still busy. */
  gaveUp(busy: BusyAnswer, now: number): R;
  /** The error thrown when `signal` fires. */
  aborted(): Error;
  /**
   * Called once, when the waiter first goes to sleep: it is in the key's queue, the store
   * subscription is live, and (at the head) the re-check found the key busy. For the server's
   * progress notice, tests and metrics.
   */
  parked?(): void;
}

/**
 * Waits for a busy key: tries, parks in the key's queue, subscribes to the store's change
 * notifications (one subscription per key, shared by its queue), and sleeps until a
 * notification, the holder's expiry or a jittered backstop poll. A notification wakes only
 * the head of the queue, so a release costs one re-check at the store however many wait
 * (no thundering herd). Only the head tries at the store, and an acquisition that finds
 * others already waiting joins them without trying: the others sleep until they are head
 * (their backstop poll finds out) or their wait ends, so waiters are served in arrival
 * order. Bounded by `until`; cancelled by `signal`. The one wait loop of the package: the
 * client and the server both wait through it.
 */
export async function waitForKey<
  R,
  G extends Releasable = Lease,
  A extends AcquireAsk = AcquireAsk,
>(wait: KeyWait<R, G, A>): Promise<R> {
  const { signal } = wait;
  let waiter: Waiter<G, A> | undefined;
  let queue: KeyWaiters<G, A> | undefined;
  let acquired = false;
  let parkedTold = false;
  const park = async (): Promise<{ waiter: Waiter<G, A>; queue: KeyWaiters<G, A> }> => {
    const w = new Waiter<G, A>(new Wakeup(wait.clock), wait.ask, wait.startedAt);
    const q = wait.queues.join(wait.ask.key, w);
    waiter = w;
    queue = q;
    const sub = await q.subscribe(() => wait.watch(q.notifyHead));
    if (!sub.ok && !sub.aborted) wait.watchFailed(sub.error);
    return { waiter: w, queue: q };
  };
  try {
    // Others already wait for the key here: trying first could take it from the head.
    if ((wait.queues.get(wait.ask.key)?.size ?? 0) > 0) await park();
    let busy: BusyAnswer | undefined;
    let pending = false;
    // The last sleep ended on its timer (the backstop poll or the holder's expiry), not on a
    // notification, and the store has another waiter of the key to wake before ours.
    let skipped = false;
    for (;;) {
      if (signal.aborted) throw wait.aborted();
      // Behind the head, a wake-up only looks whether we moved up; at the end of the wait
      // we try once more, for an up-to-date busy answer. A head that the store has queued
      // behind another client's waiter lets its timer pass: that waiter's own timer covers
      // the key, and its leaving or a release wakes us (figures in
      // docs/decisions/057-waiters-behind-skip-their-poll.md).
      if (
        waiter === undefined ||
        queue === undefined ||
        (queue.isHead(waiter) && !skipped) ||
        wait.now() >= wait.until
      ) {
        // A turn decided without the store (a local holder, a hand-off) is not awaited: a
        // waiter must park in the same step as its caller, so that a release right after
        // the call already finds it in the queue.
        const next = wait.turn(waiter);
        const turn = next instanceof Promise ? await next : next;
        if (turn.kind === 'done') {
          acquired = turn.acquired;
          return turn.result;
        }
        pending = turn.kind === 'pending';
        if (turn.kind === 'busy') busy = turn.busy;
        const now = wait.now();
        if (busy !== undefined && !pending && wait.until - now <= 0) return wait.gaveUp(busy, now);
        if (waiter === undefined) {
          const parked = await park();
          // The head re-checks once the subscription is live, so a release in between is
          // not missed; the others wait their turn (re-checking too would let them overtake).
          if (parked.queue.isHead(parked.waiter)) continue;
        }
      }
      if (waiter === undefined || queue === undefined) continue;
      const head = queue.isHead(waiter);
      if (!parkedTold && (!head || (busy !== undefined && !pending))) {
        parkedTold = true;
        wait.parked?.();
      }
      const left = wait.until - wait.now();
      let sleep: number;
      if (head && pending) {
        sleep = wait.pendingMs;
      } else {
        const poll = Math.floor(wait.pollIntervalMs * (0.8 + 0.4 * wait.random()));
        sleep = Math.min(left, poll);
        if (head && busy !== undefined && !skipped) {
          const jitter = Math.floor(wait.random() * Math.min(5, busy.retryAfterMs * 0.05 + 1));
          sleep = Math.min(sleep, busy.retryAfterMs + 1 + jitter);
        }
      }
      const why = await waiter.wakeup.wait(Math.max(1, sleep), signal);
      if (why === 'aborted') throw wait.aborted();
      skipped = why === 'timer' && queue.queuedBehindAtStore();
    }
  } finally {
    const w = waiter;
    if (w !== undefined) {
      // A hand-off still in flight, or delivered just as we gave up, is released.
      w.abandon();
      queue?.leave(w, acquired);
    }
  }
}
