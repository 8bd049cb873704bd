import { LeaseholdError } from './errors.js';

/** An opaque timer handle from {@link Clock.setTimeout}. */
export type TimerHandle = { readonly __timer: unique symbol } | object;

/**
 * The time source and timers the client uses. Injected so that simulation and tests run the
 * real client code in virtual time. `now()` must be monotonic; the client checks and fails
 * closed when it is not.
 */
export interface Clock {
  /** Monotonic milliseconds from an arbitrary origin (`performance.now()`). */
  now(): number;
  /** Wall-clock milliseconds since the epoch, for display only — never for expiry. */
  wallNow(): number;
  /**
   * Schedules `callback` after `ms`. `background` timers (renewals) should not keep the
   * process alive on their own.
   */
  setTimeout(callback: () => void, ms: number, options?: { background?: boolean }): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
  /**
   * Optional: whether a pending timer keeps the process alive (Node's `ref`/`unref`). A clock
   * that has it is taken to make timers at a cost worth saving: the client then keeps an
   * idle timer armed, not holding the process, rather than clear it and make a new one for
   * the next request or lease (see TimeoutQueue).
   */
  retain?(handle: TimerHandle, keepAlive: boolean): void;
}

/** Node's largest timer delay; longer delays fire after 1 ms, so they are never used. */
export const MAX_TIMER_MS = 2_147_483_647;

/** The real clock: `performance.now()` and Node timers. */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout(callback: () => void, ms: number, options?: { background?: boolean }): TimerHandle {
    const t = setTimeout(callback, Math.min(Math.max(0, ms), MAX_TIMER_MS));
    if (options?.background === true) t.unref();
    return t;
  },
  clearTimeout(handle: TimerHandle): void {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
  retain(handle: TimerHandle, keepAlive: boolean): void {
    const t = handle as ReturnType<typeof setTimeout>;
    if (keepAlive) t.ref();
    else t.unref();
  },
});

/**
 * Wraps a clock so that a reading that goes backwards or is not finite throws `ERR_CLOCK`:
 * a lease deadline computed from such a reading would be meaningless, so the client fails
 * closed instead.
 */
export class MonotonicGuard {
  private last = Number.NEGATIVE_INFINITY;
  constructor(private readonly clock: Clock) {}

  now(): number {
    const t = this.clock.now();
    if (!Number.isFinite(t)) {
      throw new LeaseholdError('ERR_CLOCK', `monotonic clock returned ${String(t)}`);
    }
    if (t < this.last) {
      throw new LeaseholdError(
        'ERR_CLOCK',
        `monotonic clock went backwards from ${this.last} to ${t}`,
      );
    }
    this.last = t;
    return t;
  }
}

/** Resolves after `ms` on `clock`, or rejects with the signal's reason when it aborts. */
export function delay(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      reject(abortReason(signal!));
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The error to throw for an aborted signal: always a LeaseholdError('ERR_ABORTED'). */
export function abortReason(signal: AbortSignal): LeaseholdError {
  const reason: unknown = signal.reason;
  return new LeaseholdError('ERR_ABORTED', 'the operation was aborted', { cause: reason });
}
