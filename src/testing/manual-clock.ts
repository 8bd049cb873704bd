import type { Clock, TimerHandle } from '../core/runtime/clock.js';
import { nextMacrotask } from '../core/platform.js';

interface PendingTimer {
  readonly id: number;
  readonly at: number;
  readonly callback: () => void;
}

/**
 * A virtual clock for tests and simulation: time moves only when you call {@link advance}.
 * Timers fire in time order (ties in creation order), and promise jobs queued by each
 * timer run before the next one fires, so async code interleaves deterministically.
 *
 * @example
 * const clock = new ManualClock();
 * const client = new LeaseClient({ store: new MemoryLeaseStore({ clock }), clock });
 * await clock.advance(10_000);
 */
export class ManualClock implements Clock {
  private time: number;
  private wallOffset: number;
  private nextId = 1;
  private timers: PendingTimer[] = [];

  constructor(options: { startMs?: number; wallStartMs?: number } = {}) {
    this.time = options.startMs ?? 0;
    this.wallOffset = (options.wallStartMs ?? Date.UTC(2026, 0, 1)) - this.time;
  }

  now(): number {
    return this.time;
  }

  wallNow(): number {
    return this.time + this.wallOffset;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer: PendingTimer = { id: this.nextId++, at: this.time + Math.max(0, ms), callback };
    this.timers.push(timer);
    return { id: timer.id };
  }

  clearTimeout(handle: TimerHandle): void {
    const id = (handle as { id?: number }).id;
    this.timers = this.timers.filter((t) => t.id !== id);
  }

  /** Number of timers not yet fired or cleared: 0 after a test means nothing leaked. */
  pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves the wall clock only (a wall-clock jump); the monotonic reading is unchanged. */
  jumpWall(ms: number): void {
    this.wallOffset += ms;
  }

  /** Advances time by `ms`, firing due timers in order and settling promise jobs between them. */
  async advance(ms: number): Promise<void> {
    const target = this.time + ms;
    await settle();
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next.at > target) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.time = Math.max(this.time, next.at);
      next.callback();
      await settle();
    }
    this.time = target;
    await settle();
  }

  /** Advances to the next pending timer (if any) and fires it. */
  async runNext(): Promise<boolean> {
    const next = this.earliest();
    if (next === undefined) return false;
    await this.advance(next.at - this.time);
    return true;
  }

  private earliest(): PendingTimer | undefined {
    let best: PendingTimer | undefined;
    for (const t of this.timers) if (best === undefined || t.at < best.at) best = t;
    return best;
  }
}

/** Lets queued promise jobs (and anything they queue) run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await nextMacrotask();
}
