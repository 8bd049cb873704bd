import type { Clock, TimerHandle } from './clock.js';

/**
 * Something with a timeout in a {@link TimeoutQueue}. The queue owns the link fields; an
 * object is in at most one queue at a time.
 */
export abstract class Timed {
  /** @internal */ timedDeadline = 0;
  /** @internal */ timedPrev: Timed | undefined = undefined;
  /** @internal */ timedNext: Timed | undefined = undefined;
  /** @internal */ timedList: DeadlineList | undefined = undefined;

  /** Called by the queue, once, when the timeout passes while queued (it is unqueued first). */
  abstract onTimeout(): void;
}

/**
 * The request timeouts of one client (or, with `background`, its leases' timers): one clock
 * timer per distinct timeout, not one per request.
 *
 * Requests with the same timeout, queued in the order they start, are also in deadline order;
 * each such list needs one timer, at its head's deadline. A Node timer per request cost about
 * a microsecond per acquire+release cycle, most of it Node creating and destroying its own
 * list for a delay nobody else used (decision 035).
 *
 * On a clock that can keep a timer without holding the process alive ({@link Clock.retain},
 * Node's), a list left empty keeps its timer, unreferenced, until it fires: the next request
 * costs two list links and no timer. On other clocks (simulation, tests) an empty list clears
 * its timer at once, so no timer outlives the requests.
 *
 * A timeout fires at or after its deadline (a list's timer fires early or late; due entries
 * are found by re-reading the clock). If the clock steps back, a later request may get an
 * earlier deadline than the one queued before it; it then times out with that one (late,
 * never early).
 */
export class TimeoutQueue {
  private readonly lists = new Map<number, DeadlineList>();
  private readonly lazy: boolean;
  /** Timers never keep the process alive (a held lease's renewal and deadline timers). */
  readonly background: boolean;

  constructor(
    readonly clock: Clock,
    options: { readonly background?: boolean } = {},
  ) {
    this.lazy = typeof clock.retain === 'function';
    this.background = options.background === true;
  }

  /** Queues `entry` to time out `timeoutMs` after `now` (a reading of the queue's clock). */
  add(entry: Timed, timeoutMs: number, now: number = this.clock.now()): void {
    const ms = Math.max(1, Math.ceil(timeoutMs));
    let list = this.lists.get(ms);
    if (list === undefined) {
      list = new DeadlineList(this, ms);
      this.lists.set(ms, list);
    }
    list.push(entry, now + timeoutMs);
  }

  /** Whether `entry` is queued (not yet fired or removed). */
  has(entry: Timed): boolean {
    return entry.timedList !== undefined;
  }

  /** Takes `entry` out of its queue; a no-op when it is not queued (fired or removed). */
  remove(entry: Timed): void {
    entry.timedList?.unlink(entry);
  }

  /** Clears the timers of lists with nothing queued (an idle lazy timer), e.g. on close. */
  trim(): void {
    for (const list of [...this.lists.values()]) {
      if (list.empty) {
        list.disarm();
        this.drop(list);
      }
    }
  }

  /** Timers this queue holds (for tests). */
  timers(): number {
    let n = 0;
    for (const list of this.lists.values()) if (list.armed) n++;
    return n;
  }

  /** @internal */
  isLazy(): boolean {
    return this.lazy;
  }

  /** @internal A list whose timer fired with nothing left is forgotten. */
  drop(list: DeadlineList): void {
    if (this.lists.get(list.ms) === list) this.lists.delete(list.ms);
  }
}

const BACKGROUND = Object.freeze({ background: true });

/** @internal The entries of one timeout, oldest first, and the timer at the head's deadline. */
class DeadlineList {
  private head: Timed | undefined;
  private tail: Timed | undefined;
  private size = 0;
  private timer: TimerHandle | undefined;
  private readonly fire = (): void => this.onTimer();

  constructor(
    private readonly queue: TimeoutQueue,
    readonly ms: number,
  ) {}

  get armed(): boolean {
    return this.timer !== undefined;
  }

  get empty(): boolean {
    return this.size === 0;
  }

  push(entry: Timed, deadline: number): void {
    if (entry.timedList !== undefined) entry.timedList.unlink(entry);
    const tail = this.tail;
    // Keeps the list in deadline order when the clock stepped back: late, never early.
    entry.timedDeadline =
      tail !== undefined && !(deadline >= tail.timedDeadline) ? tail.timedDeadline : deadline;
    entry.timedList = this;
    entry.timedPrev = tail;
    entry.timedNext = undefined;
    if (tail === undefined) this.head = entry;
    else tail.timedNext = entry;
    this.tail = entry;
    this.size++;
    if (this.timer === undefined) this.arm(this.ms);
    else if (this.size === 1 && !this.queue.background) this.queue.clock.retain?.(this.timer, true);
  }

  unlink(entry: Timed): void {
    if (entry.timedList !== this) return;
    const { timedPrev: prev, timedNext: next } = entry;
    if (prev === undefined) this.head = next;
    else prev.timedNext = next;
    if (next === undefined) this.tail = prev;
    else next.timedPrev = prev;
    entry.timedList = undefined;
    entry.timedPrev = undefined;
    entry.timedNext = undefined;
    if (--this.size > 0 || this.timer === undefined) return;
    if (this.queue.isLazy()) {
      // Idle: the timer stays, without holding the process alive, for the next request.
      if (!this.queue.background) this.queue.clock.retain?.(this.timer, false);
    } else {
      this.disarm();
      this.queue.drop(this);
    }
  }

  disarm(): void {
    if (this.timer !== undefined) this.queue.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delayMs: number): void {
    this.timer = this.queue.clock.setTimeout(
      this.fire,
      delayMs,
      this.queue.background ? BACKGROUND : undefined,
    );
  }

  private onTimer(): void {
    this.timer = undefined;
    const now = this.queue.clock.now();
    for (;;) {
      const head = this.head;
      // `!(deadline > now)`: a reading that is not a number counts as due (fail closed).
      if (head === undefined || head.timedDeadline > now) break;
      this.unlink(head);
      head.onTimeout();
    }
    const head = this.head;
    if (head === undefined) {
      if (this.timer === undefined) this.queue.drop(this);
      return;
    }
    if (this.timer === undefined) this.arm(Math.max(1, Math.ceil(head.timedDeadline - now)));
  }
}
