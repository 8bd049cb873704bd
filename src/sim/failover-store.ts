import { ForwardingLeaseStore } from '../testing/forwarding-store.js';
import type { Clock } from '../core/runtime/clock.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
} from '../core/store.js';
import { epochFloor } from '../stores/epoch-floor.js';
import type { MemoryLeaseState } from '../stores/memory/store.js';
import type { Row } from '../stores/memory/state.js';

/** The most grants one failover can lose (snapshots kept). */
export const MAX_LOST_GRANTS = 4;

/**
 * What travels with the data: the incarnation that last wrote it and the last epoch floor.
 * A replica's copy names the primary's incarnation; that is how a promoted replica (a new
 * incarnation) finds out, as PostgreSQL's incarnation row does.
 */
interface DataMark {
  incarnation: number;
  floor: bigint;
  floorAtMs: bigint;
}

interface Snapshot {
  readonly rows: Map<string, Row>;
  readonly mark: DataMark;
}

/** What one {@link FailoverStore.failover} did. */
export interface FailoverOutcome {
  /** Grants the new incarnation does not know about. */
  readonly lostGrants: number;
  readonly incarnation: number;
}

/**
 * The memory store behind an asynchronous replica: {@link failover} makes the store lose its
 * last k grants (and everything after the first of them: renewals, releases) and come back
 * under a new incarnation, as a promoted replica does.
 *
 * With `detect` (the real stores' behaviour), the first grant or renewal after the change
 * raises the epoch first: the floor rule every store uses (store wall clock × 1024, highest
 * token + 1, the previous floor grown since), every key's counter raised to it, every holder
 * cleared; a renewal of a lease from before the floor answers `lost` with reason `failover`.
 * Without it, the new incarnation hands the lost tokens out again.
 *
 * Counts the grants whose token is not above a token this store granted before on the key
 * ({@link reissuedTokens}), from its own log: the checker finds the same grants (I2).
 */
export class FailoverStore extends ForwardingLeaseStore {
  private incarnation = 1;
  private mark: DataMark = { incarnation: 1, floor: 0n, floorAtMs: 0n };
  private readonly snapshots: Snapshot[] = [];
  private readonly highest = new Map<string, { token: bigint; leaseId: string }>();
  /** The highest floor this store raised to (a renewal of an older token was ended by it). */
  private lossFloor = 0n;
  reissuedTokens = 0;
  epochRaises = 0;

  constructor(
    inner: LeaseStore,
    private readonly state: MemoryLeaseState,
    private readonly clock: Clock,
    readonly detect: boolean,
  ) {
    super(inner);
  }

  /** Loses the last `k` grants (at most {@link MAX_LOST_GRANTS}) and changes incarnation. */
  failover(k: number): FailoverOutcome {
    const back = Math.min(k, this.snapshots.length);
    if (back > 0) {
      const snap = this.snapshots[this.snapshots.length - back]!;
      this.state.rows.clear();
      for (const [key, row] of snap.rows) this.state.rows.set(key, { ...row });
      this.mark = { ...snap.mark };
      this.snapshots.length = 0;
    }
    this.incarnation++;
    return { lostGrants: back, incarnation: this.incarnation };
  }

  override tryAcquire(
    request: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.checkIncarnation();
    this.applyFloor(request.key);
    const snap = this.snapshot();
    // The memory store acts synchronously up to its promise: the snapshot is the state before.
    const answer = this.inner.tryAcquire(request, o);
    return answer.then((a) => this.logGrant(request, a, snap));
  }

  override async renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.checkIncarnation();
    const answer = await this.inner.renew(lease, o);
    if (answer.status === 'lost' && lease.token <= this.lossFloor)
      return { status: 'lost', reason: 'failover' };
    return answer;
  }

  /**
   * Checked too, unlike PostgreSQL's releases: a release of a lease whose successor's grant
   * was lost is harmless there (the new incarnation has no successor), but the history knows
   * the successor, and its release-safety check (I7) would count it.
   */
  override release(lease: StoreLeaseRef, o: StoreRequestOptions): Promise<StoreReleaseResult> {
    this.checkIncarnation();
    return this.inner.release(lease, o);
  }

  protected override async handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    this.checkIncarnation();
    this.applyFloor(acquire.key);
    const snap = this.snapshot();
    const answer = await super.handOff(release, acquire, o);
    return { released: answer.released, acquired: this.logGrant(acquire, answer.acquired, snap) };
  }

  /** Raises the epoch when the data was last written by another incarnation. */
  private checkIncarnation(): void {
    if (!this.detect || this.mark.incarnation === this.incarnation) return;
    const nowMs = BigInt(Math.floor(this.clock.wallNow()));
    let highest = 0n;
    for (const row of this.state.rows.values()) if (row.topToken > highest) highest = row.topToken;
    const floor = epochFloor({
      nowMs,
      highest,
      previous: [{ floor: this.mark.floor, atMs: this.mark.floorAtMs }],
      atLeast: 0n,
    });
    for (const row of this.state.rows.values()) {
      if (row.topToken < floor) row.topToken = floor;
      row.leaseId = undefined;
      row.ownerId = undefined;
      row.value = undefined;
      row.expiresAt = Number.NEGATIVE_INFINITY;
    }
    this.mark = { incarnation: this.incarnation, floor, floorAtMs: nowMs };
    if (floor > this.lossFloor) this.lossFloor = floor;
    this.epochRaises++;
  }

  /** A key first granted after a raise starts above the floor (PostgreSQL's insert trigger). */
  private applyFloor(key: string): void {
    if (this.mark.floor === 0n || this.state.rows.has(key)) return;
    this.state.rows.set(key, {
      lastToken: this.mark.floor,
      topToken: this.mark.floor,
      leaseId: undefined,
      ownerId: undefined,
      expiresAt: Number.NEGATIVE_INFINITY,
      value: undefined,
    });
  }

  private snapshot(): Snapshot {
    const rows = new Map<string, Row>();
    for (const [key, row] of this.state.rows) rows.set(key, { ...row });
    return { rows, mark: { ...this.mark } };
  }

  private logGrant(
    request: StoreAcquireRequest,
    answer: StoreAcquireResult,
    before: Snapshot,
  ): StoreAcquireResult {
    if (answer.status !== 'acquired') return answer;
    // A repeated request of the lease already held answers its token again: not a new grant.
    const prior = before.rows.get(request.key);
    if (prior?.leaseId === request.leaseId && prior.lastToken === answer.token) return answer;
    const top = this.highest.get(request.key);
    // The same lease granted again (its request repeated after the grant was lost) is no repeat.
    if (top !== undefined && answer.token <= top.token && top.leaseId !== request.leaseId)
      this.reissuedTokens++;
    const granted = this.state.rows.get(request.key)?.topToken ?? answer.token;
    if (top === undefined || granted > top.token)
      this.highest.set(request.key, { token: granted, leaseId: request.leaseId });
    this.snapshots.push(before);
    if (this.snapshots.length > MAX_LOST_GRANTS) this.snapshots.shift();
    return answer;
  }
}
