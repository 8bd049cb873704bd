import type { Logger } from '../../core/events.js';
import type { StoreRequestOptions } from '../../core/store.js';
import type { RedisClient } from '../../drivers/redis/client.js';
import { whenConnected } from './client.js';
import { closedError } from './errors.js';
import { EvictionGuard, type EvictionCheck } from './eviction-check.js';

/**
 * The one gate every operation of the Redis store passes before it sends: the client is
 * connected, the start-up check (`maxmemory-policy`, eviction-check.ts) has run and did not
 * refuse, and the store is not closed. {@link isOpen} is the hot path's test, with no promise
 * and no await (an `await` per request is a microtask and a promise); {@link untilOpen} waits
 * for the connection and the check, then throws as {@link gate} does.
 */
export class RedisReadiness {
  private readonly eviction: EvictionGuard | undefined;
  /** The start-up check; never rejects unobserved. */
  readonly check: Promise<void>;
  private checked = false;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    evictionCheck: EvictionCheck,
    logger: Logger,
  ) {
    this.eviction =
      evictionCheck === 'off' ? undefined : new EvictionGuard(redis, evictionCheck, logger);
    this.check =
      this.eviction === undefined
        ? Promise.resolve()
        : this.eviction.start().finally(() => {
            this.checked = true;
          });
    if (evictionCheck === 'off') this.checked = true;
    // ready() reports the outcome; unobserved, a failed check must not crash the process.
    this.check.catch(() => undefined);
  }

  /** Whether an operation may send now without waiting (it must still call {@link gate}). */
  isOpen(): boolean {
    return this.redis.status === 'ready' && this.checked && !this.closed;
  }

  /**
   * Waits for a client that is still connecting (see {@link whenConnected}) and for the
   * start-up check, then {@link gate}s. `options.signal` ends the wait for the connection.
   */
  async untilOpen(options: StoreRequestOptions | undefined): Promise<void> {
    if (this.redis.status !== 'ready') await whenConnected(this.redis, options?.signal);
    if (!this.checked) await this.check;
    this.gate();
  }

  /**
   * Throws once the store is closed or its start-up check refused it. `options.signal` is
   * not read: the client never sends an aborted request, and reading it makes the client
   * create an AbortController per request.
   */
  gate(): void {
    if (this.closed) throw closedError();
    if (this.eviction?.refused) throw this.eviction.refused;
  }

  /** Resolves once the start-up check ran; rejects with what refused the store. */
  async started(): Promise<void> {
    await this.check;
    if (this.eviction?.refused) throw this.eviction.refused;
  }

  /** Closes the gate for good; answers false when it was already closed. */
  close(): boolean {
    if (this.closed) return false;
    this.closed = true;
    this.eviction?.stop();
    return true;
  }
}
