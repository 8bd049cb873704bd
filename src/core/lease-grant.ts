import type { MonotonicGuard } from './runtime/clock.js';
import type { LeaseEvents, Logger } from './events.js';
import type { RenewalBatcher } from './renewal-batch.js';
import type { Lease } from './lease.js';
import type { ReleaseResult } from './results.js';
import type { TimeoutQueue } from './runtime/timeout-queue.js';
import type { LeaseStore } from './store.js';
import type { Token } from './types.js';

/** What a lease uses of the client that made it: one object per client, shared by its leases. */
export interface LeaseContext {
  readonly store: LeaseStore;
  readonly ownerId: string;
  readonly guard: MonotonicGuard;
  /** The client's request timeouts (renewals and the release use them). */
  readonly timeouts: TimeoutQueue;
  /** The client's lease timers (background: they never keep the process alive). */
  readonly leaseTimers: TimeoutQueue;
  readonly events: LeaseEvents;
  readonly logger: Logger;
  /** Timeout for a release request, and the cap on a renewal's. */
  readonly requestTimeoutMs: number;
  /**
   * Where the store renews in batches: gathers the renewals that fall due together into one
   * call, and background renewals are due on its grid (renewal-batch.ts).
   */
  readonly renewals: RenewalBatcher | undefined;
}

/** What is particular to one lease: the grant it stands for. */
export interface LeaseGrant {
  readonly key: string;
  readonly leaseId: string;
  readonly token: Token;
  /**
   * The store lease this lease acts under, when it is a local successor (decision 007): the
   * token the store's record holds (renew and release send it) and the last token of the
   * block that store grant reserved. Absent for a lease the store granted itself: `token`
   * is then both, unless `blockEnd` says the grant reserved more.
   */
  readonly storeToken?: Token;
  readonly blockEnd?: Token;
  readonly value: string | undefined;
  readonly ttlMs: number;
  /** The clock-drift allowance subtracted from every deadline. */
  readonly driftMs: number;
  /**
   * Monotonic time taken before the request that established the store lease's current
   * validity was sent: the acquire, or for a local successor its predecessor's last
   * confirmed renewal (the deadline is measured from it).
   */
  readonly sentAt: number;
  /** When this lease began, for `heldMs`; defaults to `sentAt`. */
  readonly grantedAt?: number;
  /** Background renewal cadence, or undefined to renew only by hand. */
  readonly renewEveryMs: number | undefined;
}

/** How a lease tells its client that it is being released and that it has ended. */
export interface LeaseHooks {
  /**
   * Offered the release first: returns the outcome when it passed the key straight to a
   * waiter (one atomic release-and-acquire), a function when the key passes to a local
   * successor under the same store lease (called once the release is reported), or
   * undefined to release as usual.
   */
  handOff(lease: Lease): Promise<ReleaseResult> | (() => void) | undefined;
  /** Called once, when the lease is lost or released. */
  settled(lease: Lease): void;
}
