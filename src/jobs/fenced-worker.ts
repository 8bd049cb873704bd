import type { AttemptResult } from './attempt-result.js';
import { pollLoop } from './poll-loop.js';
import type { ResolvedWorkerOptions } from './worker-options.js';

/**
 * What every fenced queue worker shares: the background loops and stopping. A queue adapter
 * supplies {@link runOnce} (fetch one job, run its attempt).
 */
export abstract class FencedWorker<J, R> {
  protected readonly options: ResolvedWorkerOptions<J, R>;
  /** Fires when {@link stop} is called: no new fetch, and every running attempt's signal. */
  protected readonly stopping = new AbortController();
  private loops: Promise<void>[] = [];

  protected constructor(options: ResolvedWorkerOptions<J, R>) {
    this.options = options;
  }

  /** Fetches one job and runs its attempt; undefined when the queue had none. */
  abstract runOnce(): Promise<AttemptResult<R> | undefined>;

  /** Starts fetching and running jobs in the background until {@link stop}. */
  start(): void {
    if (this.loops.length > 0 || this.stopping.signal.aborted) return;
    const { pollMs, logger, concurrency } = this.options;
    for (let i = 0; i < concurrency; i++) {
      this.loops.push(pollLoop(() => this.runOnce(), pollMs, this.stopping.signal, logger));
    }
  }

  /** Stops fetching, fires the running attempts' signals and waits for them to settle. */
  async stop(): Promise<void> {
    this.stopping.abort('stopping');
    await Promise.all(this.loops);
    this.loops = [];
  }
}
