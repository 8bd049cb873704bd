import { ForwardingLeaseStore } from '../testing/forwarding-store.js';
import type { Clock } from '../core/runtime/clock.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreRenewResult,
  StoreRequestOptions,
} from '../core/store.js';
import type { MemoryLeaseState } from '../stores/memory/store.js';

/**
 * Bugs the simulation must find, planted in a store wrapper (never in a real store):
 * - `revive_lost`: a renew of an expired lease succeeds if nobody took the key since — a lost
 *   lease comes back (breaks I7).
 * - `reuse_token`: a grant after a release or expiry reuses the last token instead of a new
 *   one (breaks I2).
 * - `hand_off_reuse_token`: a hand-off (`releaseAndAcquire`) grants the waiter the token of
 *   the lease it just released; plain acquisitions are right (breaks I2, I5, and I1 when the
 *   two holders' writes meet at the fence).
 * - `ignore_token_block`: the store claims token blocks but reserves nothing, so the next
 *   grant reuses a token a client's local successor holds (breaks I2, and I1 when the two
 *   holders' writes meet at the fence).
 * - `miss_failover`: the store fails over (it loses its last grants and comes back as a new
 *   incarnation, src/sim/failover-store.ts) and does not notice: the lost tokens are granted
 *   again (breaks I2, and I1 when two holders of one token meet at the fence).
 */
export type PlantedBug =
  | 'revive_lost'
  | 'reuse_token'
  | 'hand_off_reuse_token'
  | 'ignore_token_block'
  | 'miss_failover'
  | GroupBug;

/**
 * Bugs of the semaphore, set and lock-delay workloads (`src/sim/group-workloads.ts`):
 * - `slot_limit_off_by_one`: the slot search runs one slot too far (slots `0 … limit`), so a
 *   semaphore admits `limit + 1` holders (breaks I10). Planted in the harness's call.
 * - `non_atomic_set`: a set acquisition that keeps the keys it got when a later key stays
 *   busy, and reports the set held — half-held, its missing key another owner's (breaks I11).
 *   Planted in the harness's set acquisition.
 * - `lock_delay_client_clock`: the store measures the lock-delay against the clock of the
 *   process asking (a client's), not its own: a client whose clock runs ahead is granted the
 *   key inside the delay (breaks I12). Planted in this store wrapper.
 */
export type GroupBug = 'slot_limit_off_by_one' | 'non_atomic_set' | 'lock_delay_client_clock';

/** The bugs of the group workloads, for CLI validation. */
export const GROUP_BUGS: readonly GroupBug[] = [
  'slot_limit_off_by_one',
  'non_atomic_set',
  'lock_delay_client_clock',
];

/** The planted bugs, for CLI validation. */
export const PLANTED_BUGS: readonly PlantedBug[] = [
  'revive_lost',
  'reuse_token',
  'hand_off_reuse_token',
  'ignore_token_block',
  'miss_failover',
];

/**
 * A memory store with one planted bug, for proving the simulation and checker catch it.
 * Works on the {@link MemoryLeaseState} the real memory store uses.
 */
export class PlantedBugStore extends ForwardingLeaseStore {
  /** The process whose request is being served right now (`lock_delay_client_clock`). */
  caller: Clock | undefined;

  constructor(
    inner: LeaseStore,
    private readonly state: MemoryLeaseState,
    private readonly clock: Clock,
    readonly bug: PlantedBug,
  ) {
    super(inner);
  }

  override get kind(): string {
    return `${this.inner.kind}+${this.bug}`;
  }

  override tryAcquire(
    request: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    if (this.bug === 'ignore_token_block' && request.tokenBlock !== undefined) {
      const { tokenBlock: _ignored, ...rest } = request;
      return this.inner.tryAcquire(rest, o);
    }
    if (this.bug === 'lock_delay_client_clock' && this.caller !== undefined) {
      const row = this.state.rows.get(request.key);
      const now = this.clock.now();
      if (row?.leaseId !== undefined && row.expiresAt <= now && request.ignoreLockDelay !== true) {
        // The bug: the delay's end is compared with the asking client's clock.
        const delayEnd = row.expiresAt + (row.lockDelayMs ?? 0);
        if (delayEnd > now && this.caller.now() >= delayEnd)
          return this.inner.tryAcquire({ ...request, ignoreLockDelay: true }, o);
      }
    }
    if (this.bug === 'reuse_token') {
      const row = this.state.rows.get(request.key);
      const live =
        row !== undefined && row.leaseId !== undefined && row.expiresAt > this.clock.now();
      if (row !== undefined && !live && row.lastToken > 0n) row.topToken = row.lastToken - 1n;
    }
    return this.inner.tryAcquire(request, o);
  }

  override async renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    const answer = await this.inner.renew(lease, o);
    if (this.bug !== 'revive_lost' || answer.status === 'renewed') return answer;
    const row = this.state.rows.get(lease.key);
    if (row !== undefined && row.lastToken === lease.token && row.leaseId === lease.leaseId) {
      row.expiresAt = this.clock.now() + lease.ttlMs;
      return { status: 'renewed' };
    }
    return answer;
  }

  /**
   * Release, then this wrapper's own `tryAcquire` (so `reuse_token` reaches hand-off grants
   * too), with nothing in between: the memory store acts synchronously up to its promise.
   */
  protected override async handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    const released = this.inner.release(release, o);
    const row = this.state.rows.get(release.key);
    if (
      this.bug === 'hand_off_reuse_token' &&
      row !== undefined &&
      row.leaseId === undefined &&
      row.lastToken === release.token
    )
      row.topToken = row.lastToken - 1n;
    const acquired = this.tryAcquire(acquire, o);
    return { released: (await released).status, acquired: await acquired };
  }
}

/**
 * Tells a {@link PlantedBugStore} which process's request it is serving, for the length of
 * the synchronous call into it (every wrapper between calls its inner store synchronously).
 */
export class CallerTaggedStore extends ForwardingLeaseStore {
  constructor(
    inner: LeaseStore,
    private readonly planted: PlantedBugStore,
    private readonly proc: Clock,
  ) {
    super(inner);
  }

  override tryAcquire(
    request: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    return this.tagged(() => this.inner.tryAcquire(request, o));
  }

  protected override handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    return this.tagged(() => super.handOff(release, acquire, o));
  }

  private tagged<T>(fn: () => T): T {
    this.planted.caller = this.proc;
    try {
      return fn();
    } finally {
      this.planted.caller = undefined;
    }
  }
}
