import type { Clock, TimerHandle } from './clock.js';

/**
 * One wait for the first of: a notification, a timer, or an abort. Used by waiting
 * acquisitions so that they sleep on the store's change notifications, not on a poll loop.
 */
export class Wakeup {
  private wake: (() => void) | undefined;
  private pendingNotify = false;

  constructor(private readonly clock: Clock) {}

  /** Wakes the current wait, or the next one if nobody waits yet. */
  notify = (): void => {
    if (this.wake) this.wake();
    else this.pendingNotify = true;
  };

  /** Resolves with why it woke. */
  wait(ms: number, signal: AbortSignal | undefined): Promise<'notified' | 'timer' | 'aborted'> {
    if (signal?.aborted === true) return Promise.resolve('aborted');
    if (this.pendingNotify) {
      this.pendingNotify = false;
      return Promise.resolve('notified');
    }
    return new Promise((resolve) => {
      let timer: TimerHandle | undefined;
      const done = (why: 'notified' | 'timer' | 'aborted'): void => {
        this.wake = undefined;
        if (timer !== undefined) this.clock.clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(why);
      };
      const onAbort = (): void => done('aborted');
      this.wake = () => done('notified');
      timer = this.clock.setTimeout(() => {
        timer = undefined;
        done('timer');
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
