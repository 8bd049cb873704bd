import type { LeaseClient } from './client.js';
import { LeaseholdError } from './errors.js';
import type { Lease } from './lease.js';
import type { ReleaseResult } from './results.js';
import type { Token } from './types.js';

/**
 * Leadership of one election: the capability to lead under `epoch` until `signal` fires.
 *
 * Put `epoch` into every downstream write and let the resource reject lower epochs (a fence):
 * `isLeader()` is a hint for deciding whether to *start* work, never the authorisation — a
 * paused leader resumes believing it leads until it checks the clock.
 */
export class Leadership implements AsyncDisposable {
  /** The election's name. */
  readonly name: string;
  /** The lease key (`election/NAME`). */
  readonly key: string;
  /** The epoch: the lease's fencing token, greater than every earlier leader's. */
  readonly epoch: Token;
  /** The leader's value as followers see it. */
  readonly value: string | undefined;
  /** The underlying lease. */
  readonly lease: Lease;
  private readonly stepped = new AbortController();
  private readonly combined: AbortSignal;
  private readonly unsubscribe: () => void;

  /** @internal Made by {@link Election.campaign}. */
  constructor(
    name: string,
    lease: Lease,
    client: LeaseClient,
    stepDown: 'deadline' | 'first_failure',
  ) {
    this.name = name;
    this.key = lease.key;
    this.epoch = lease.token;
    this.value = lease.value;
    this.lease = lease;
    this.combined = AbortSignal.any([lease.signal, this.stepped.signal]);
    this.unsubscribe =
      stepDown === 'first_failure'
        ? client.on('renew_failed', (e) => {
            if (e.key === this.key && e.token === this.epoch) {
              this.stepped.abort(
                new LeaseholdError(
                  'ERR_LEASE_LOST',
                  `leadership of ${name} (epoch ${this.epoch}) stepped down: a renewal failed`,
                ),
              );
              void this.resign();
            }
          })
        : () => undefined;
    lease.signal.addEventListener('abort', () => this.unsubscribe(), { once: true });
  }

  /**
   * Fires when leadership ends: resigned, lost at the store, or stepped down because a
   * renewal failed (at the latest at the lease's local deadline, which comes before the store
   * can elect anyone else). Stop starting work when it fires.
   */
  get signal(): AbortSignal {
    return this.combined;
  }

  /** True while leading by the local, conservative deadline. A hint, never an authorisation. */
  isLeader(): boolean {
    return !this.combined.aborted && this.lease.isValid();
  }

  /** Throws `ERR_LEASE_LOST` unless still leading for at least `minRemainingMs`. */
  assertLeader(minRemainingMs = 0): void {
    if (this.combined.aborted) {
      throw new LeaseholdError(
        'ERR_LEASE_LOST',
        `leadership of ${this.name} (epoch ${this.epoch}) has ended`,
      );
    }
    this.lease.assertValid(minRemainingMs);
  }

  /** Steps down at once and releases the election at the store, so a follower takes over. */
  resign(): Promise<ReleaseResult> {
    this.unsubscribe();
    return this.lease.release();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.resign();
  }
}
