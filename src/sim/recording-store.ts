import { ForwardingLeaseStore } from '../core/forwarding-store.js';
import type { Clock } from '../core/clock.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
} from '../core/store.js';
import type { HistoryRecorder } from './history.js';

/**
 * Short, deterministic labels for lease ids (`L1`, `L2` … in order of first sight): lease
 * ids are random UUIDs, and a replayed seed must produce the same history text.
 */
export class LeaseLabels {
  private readonly labels = new Map<string, string>();

  of(leaseId: string): string {
    let label = this.labels.get(leaseId);
    if (label === undefined) {
      label = `L${this.labels.size + 1}`;
      this.labels.set(leaseId, label);
    }
    return label;
  }
}

/**
 * Wraps the store on the server side of the simulated network and records what it did, at
 * the moment it did it: grants whose answers are later lost are in the history too.
 *
 * Times are true (virtual) time, and expiry is `now + ttl` — what the store's clock would
 * say if it were right. A store whose own clock jumps (F8) then shows up as overlapping
 * leases (I3, expected under that fault), which is exactly the danger: measured on the
 * faulty clock itself, the intervals would look disjoint.
 */
export class RecordingStore extends ForwardingLeaseStore {
  constructor(
    inner: LeaseStore,
    private readonly harnessClock: Clock,
    private readonly history: HistoryRecorder,
    private readonly labels: LeaseLabels,
  ) {
    super(inner);
  }

  override async tryAcquire(
    request: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    const at = this.harnessClock.now();
    const lease = this.labels.of(request.leaseId);
    const answer = await this.inner.tryAcquire(request, o);
    const op = this.history.newOp('s');
    if (answer.status === 'acquired') {
      this.history.record({
        type: 'store',
        op,
        action: 'grant',
        at,
        t: this.harnessClock.now(),
        key: request.key,
        lease,
        token: answer.token.toString(),
        expiresAt: at + request.ttlMs,
      });
    }
    return answer;
  }

  override async renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    const at = this.harnessClock.now();
    const answer = await this.inner.renew(lease, o);
    this.history.record({
      type: 'store',
      op: this.history.newOp('s'),
      action: answer.status === 'renewed' ? 'renewed' : 'renew_lost',
      at,
      t: this.harnessClock.now(),
      key: lease.key,
      lease: this.labels.of(lease.leaseId),
      token: lease.token.toString(),
      ...(answer.status === 'renewed' ? { expiresAt: at + lease.ttlMs } : {}),
    });
    return answer;
  }

  override async release(
    lease: StoreLeaseRef,
    o: StoreRequestOptions,
  ): Promise<StoreReleaseResult> {
    const at = this.harnessClock.now();
    const answer = await this.inner.release(lease, o);
    this.history.record({
      type: 'store',
      op: this.history.newOp('s'),
      action: answer.status,
      at,
      t: this.harnessClock.now(),
      key: lease.key,
      lease: this.labels.of(lease.leaseId),
      token: lease.token.toString(),
    });
    return answer;
  }
}
