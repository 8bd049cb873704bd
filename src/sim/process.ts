import type { Clock, TimerHandle } from '../core/runtime/clock.js';
import type { ManualClock } from '../testing/manual-clock.js';

interface ProcTimer {
  readonly id: number;
  base: TimerHandle | undefined;
  readonly callback: () => void;
}

/**
 * One simulated process: a {@link Clock} derived from the shared virtual clock, which can
 * run at another rate, jump, freeze (a GC pause or SIGSTOP: nothing of the process runs, its
 * timers and incoming messages wait) and crash (nothing of it ever runs again).
 *
 * Reading: `local = anchorLocal + rate × (virtual − anchorVirtual)`. A jump moves only the
 * local reading; timers already armed keep their virtual due times.
 */
export class SimProcess implements Clock {
  private rate = 1;
  private anchorVirtual: number;
  private anchorLocal: number;
  private paused = false;
  private crashedFlag = false;
  private deferred: (() => void)[] = [];
  private readonly timers = new Map<number, ProcTimer>();
  private nextId = 1;

  constructor(
    readonly name: string,
    private readonly virtual: ManualClock,
  ) {
    this.anchorVirtual = virtual.now();
    this.anchorLocal = virtual.now();
  }

  now(): number {
    return this.anchorLocal + this.rate * (this.virtual.now() - this.anchorVirtual);
  }

  wallNow(): number {
    return this.virtual.wallNow() + (this.now() - this.virtual.now());
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer: ProcTimer = { id: this.nextId++, base: undefined, callback };
    this.timers.set(timer.id, timer);
    if (this.crashedFlag) return { id: timer.id };
    timer.base = this.virtual.setTimeout(
      () => {
        timer.base = undefined;
        if (!this.timers.has(timer.id)) return;
        this.timers.delete(timer.id);
        this.run(callback);
      },
      Math.max(0, ms) / this.rate,
    );
    return { id: timer.id };
  }

  clearTimeout(handle: TimerHandle): void {
    const id = (handle as { id?: number }).id;
    if (id === undefined) return;
    const timer = this.timers.get(id);
    if (timer === undefined) return;
    this.timers.delete(id);
    if (timer.base !== undefined) this.virtual.clearTimeout(timer.base);
  }

  /** Runs `fn` in this process: now, or at resume when frozen, or never after a crash. */
  run(fn: () => void): void {
    if (this.crashedFlag) return;
    if (this.paused) this.deferred.push(fn);
    else fn();
  }

  /** True while frozen. */
  get frozen(): boolean {
    return this.paused;
  }

  get crashed(): boolean {
    return this.crashedFlag;
  }

  /** Freezes the process for `ms` of virtual time; resolves when it runs again. */
  freeze(ms: number): Promise<void> {
    if (this.crashedFlag) return new Promise<void>(() => undefined);
    this.paused = true;
    return new Promise<void>((resolve) => {
      this.virtual.setTimeout(() => {
        this.paused = false;
        // The frozen stack continues first (it was mid-instruction); timers and messages that
        // came due meanwhile run on the next turn, as on a real event loop after a pause.
        resolve();
        this.virtual.setTimeout(() => {
          const queue = this.deferred;
          this.deferred = [];
          for (const fn of queue) this.run(fn);
        }, 0);
      }, ms);
    });
  }

  /** Stops the process for good: no timer or message of it runs again. */
  crash(): void {
    this.crashedFlag = true;
    this.deferred = [];
    for (const t of this.timers.values())
      if (t.base !== undefined) this.virtual.clearTimeout(t.base);
    this.timers.clear();
  }

  /** Steps the local clock by `ms` (negative: backwards, which the client must refuse). */
  jump(ms: number): void {
    this.anchorLocal = this.now() + ms;
    this.anchorVirtual = this.virtual.now();
  }

  /** Runs the local clock at `rate` × virtual time from now on (0.5 = half speed). */
  setRate(rate: number): void {
    this.anchorLocal = this.now();
    this.anchorVirtual = this.virtual.now();
    this.rate = rate;
  }

  /** The virtual time at which this clock will read `local`, at the current rate. */
  toVirtual(local: number): number {
    return this.anchorVirtual + (local - this.anchorLocal) / this.rate;
  }

  /** Resolves after `ms` of this process's time (frozen time does not count as running). */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.setTimeout(resolve, ms);
    });
  }
}
