import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreRenewResult,
  StoreRequestOptions,
} from '../core/store.js';
import { ForwardingLeaseStore } from '../testing/forwarding-store.js';
import { sharedNow, type RenewCallRecord } from './protocol.js';

/** Calls kept in the renewal log; a run makes a few dozen, this only bounds a runaway one. */
const RENEW_LOG_LIMIT = 1000;

/**
 * Wraps the store: remembers the store's own expiry for each lease id (for I3/I4 in the
 * history), and logs every renewal call with its timeout against the validity the current
 * lease has left (`remaining` reads it without side effects). A {@link ForwardingLeaseStore},
 * so the client's hand-off path is there exactly when the store has it.
 */
export class ObservedStore extends ForwardingLeaseStore {
  /** The store call of the latest renewal (whether its answer came is what makes it ambiguous). */
  lastRenewCall: RenewCallRecord | undefined;

  constructor(
    inner: LeaseStore,
    private readonly expiries: Map<string, number>,
    private readonly renewLog: RenewCallRecord[],
    private readonly remaining: () => number,
  ) {
    super(inner);
  }

  override async tryAcquire(
    req: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    const a = await this.inner.tryAcquire(req, o);
    if (a.status === 'acquired' && a.expiresAtWallMs !== undefined)
      this.expiries.set(req.leaseId, a.expiresAtWallMs);
    return a;
  }

  override async renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    const call: RenewCallRecord = {
      t: sharedNow(),
      timeoutMs: o.timeoutMs,
      remainingMs: this.remaining(),
      outcome: 'pending',
    };
    if (this.renewLog.length < RENEW_LOG_LIMIT) this.renewLog.push(call);
    this.lastRenewCall = call;
    try {
      const a = await this.inner.renew(lease, o);
      if (a.status === 'renewed' && a.expiresAtWallMs !== undefined)
        this.expiries.set(lease.leaseId, a.expiresAtWallMs);
      call.outcome = a.status;
      return a;
    } catch (err) {
      call.outcome = 'error';
      throw err;
    } finally {
      call.endT = sharedNow();
    }
  }

  protected override async handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    const a = await super.handOff(release, acquire, o);
    if (a.acquired.status === 'acquired' && a.acquired.expiresAtWallMs !== undefined)
      this.expiries.set(acquire.leaseId, a.acquired.expiresAtWallMs);
    return a;
  }
}
