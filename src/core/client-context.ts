import { abortReason, MonotonicGuard, type Clock } from './runtime/clock.js';
import type { ResolvedClientOptions } from './client-options.js';
import { LeaseholdError } from './errors.js';
import { debugEnabled, LeaseEvents, type Logger } from './events.js';
import { nodeProcess } from './platform.js';
import { TimeoutQueue } from './runtime/timeout-queue.js';
import { RenewalBatcher } from './renewal-batch.js';
import { isBatchRenewingLeaseStore, type LeaseStore } from './store.js';

/** What one acquisition sends: its key, TTL, value and drift allowance. */
export interface AcquireAsk {
  readonly key: string;
  readonly ttlMs: number;
  readonly driftMs: number;
  readonly renewEveryMs: number | undefined;
  readonly value: string | undefined;
  /** The lock-delay this grant leaves after an expiry; undefined for none. */
  readonly lockDelayMs?: number;
  /** Grant during the key's lock-delay. */
  readonly ignoreLockDelay?: boolean;
}

/**
 * What every lease and every acquisition of one client share: the store, the owner id, the
 * clock and its timer queues, events and logs, and the close signal. Made once per client;
 * a lease holds a reference to it instead of a copy of each field.
 */
export class ClientContext {
  readonly store: LeaseStore;
  readonly ownerId: string;
  readonly clock: Clock;
  readonly guard: MonotonicGuard;
  /** The timeouts of this client's store requests, its leases' included. */
  readonly timeouts: TimeoutQueue;
  /** Its leases' renewal and deadline timers (background: they never keep the process alive). */
  readonly leaseTimers: TimeoutQueue;
  readonly events: LeaseEvents;
  readonly logger: Logger;
  readonly debugLogs: boolean;
  readonly random: () => number;
  readonly requestTimeoutMs: number;
  readonly pollIntervalMs: number;
  readonly driftRatio: number;
  readonly maxHandOffRun: number;
  readonly tokenBlock: number;
  readonly renewals: RenewalBatcher | undefined;
  private readonly closing = new AbortController();

  constructor(options: ResolvedClientOptions) {
    this.store = options.store;
    this.ownerId = options.ownerId;
    this.clock = options.clock;
    this.guard = new MonotonicGuard(options.clock);
    this.timeouts = new TimeoutQueue(options.clock);
    this.leaseTimers = new TimeoutQueue(options.clock, { background: true });
    this.logger = options.logger;
    this.debugLogs = debugEnabled(options.logger);
    this.events = new LeaseEvents(options.logger);
    this.random = options.random;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.pollIntervalMs = options.pollIntervalMs;
    this.driftRatio = options.driftRatio;
    this.maxHandOffRun = options.maxHandOffRun;
    this.tokenBlock = options.tokenBlock;
    this.renewals = isBatchRenewingLeaseStore(options.store)
      ? new RenewalBatcher(options.store, options.clock, this.timeouts)
      : undefined;
    // Every pending acquire listens on the close signal; many at once is normal, not a leak.
    nodeProcess()?.getBuiltinModule('node:events').setMaxListeners(0, this.closing.signal);
  }

  /** Fires when the client closes. */
  get closeSignal(): AbortSignal {
    return this.closing.signal;
  }

  get closed(): boolean {
    return this.closing.signal.aborted;
  }

  /** Closes: every wait and late request tied to {@link closeSignal} ends with `ERR_CLOSED`. */
  close(): void {
    this.closing.abort(new LeaseholdError('ERR_CLOSED', 'the lease client was closed'));
  }

  assertOpen(): void {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the lease client was closed');
  }

  /** The error a cancelled acquisition throws: `ERR_CLOSED` once the client closed. */
  abortError(signal: AbortSignal): LeaseholdError {
    if (this.closed) return new LeaseholdError('ERR_CLOSED', 'the lease client was closed');
    return abortReason(signal);
  }
}
