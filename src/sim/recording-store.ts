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
import type { HistoryRecorder } from '../history/recorder.js';
import type { StoreOpEvent, StoreOpFunction } from '../history/events.js';

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
        ...delayFields(request),
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

  /**
   * A hand-off is one atomic step at the store: its release and (when it grants) its grant
   * are recorded at the same store instant, release first, both marked `handOff`.
   */
  protected override async handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    const at = this.harnessClock.now();
    const released = this.labels.of(release.leaseId);
    const granted = this.labels.of(acquire.leaseId);
    const answer = await super.handOff(release, acquire, o);
    const t = this.harnessClock.now();
    this.history.record({
      type: 'store',
      op: this.history.newOp('s'),
      action: answer.released,
      at,
      t,
      key: release.key,
      lease: released,
      token: release.token.toString(),
      handOff: true,
    });
    if (answer.acquired.status === 'acquired') {
      this.history.record({
        type: 'store',
        op: this.history.newOp('s'),
        action: 'grant',
        at,
        t,
        key: acquire.key,
        lease: granted,
        token: answer.acquired.token.toString(),
        expiresAt: at + acquire.ttlMs,
        handOff: true,
        ...delayFields(acquire),
      });
    }
    return answer;
  }
}

/** A grant's lock-delay fields for its `store` event (I12): only when the request has them. */
function delayFields(request: {
  lockDelayMs?: number | undefined;
  ignoreLockDelay?: boolean | undefined;
}): {
  lockDelayMs?: number;
  ignoreLockDelay?: boolean;
} {
  return {
    ...(request.lockDelayMs === undefined ? {} : { lockDelayMs: request.lockDelayMs }),
    ...(request.ignoreLockDelay === true ? { ignoreLockDelay: true } : {}),
  };
}

/**
 * Wraps one process's view of the store (the client side of the simulated network) and
 * records every request as a `store_op`: `invoke` when it is sent, its answer when the reply
 * reaches the process, `info` when the store threw, nothing when the request or reply was
 * lost. `storeAt` is the **store's own** clock (the one the memory store decides expiry by)
 * at both moments, so the store acted at a store time in between — also under a store clock
 * jump, which moves both. These records are what I5 checks.
 *
 * A late answer (after the client's own timeout) is still recorded: it is what the store
 * did. A request the network delivers twice is two operations at the store; the copy's
 * answer is never read, so it is recorded as an invocation without an answer
 * ({@link StoreOpRecorder.duplicated}).
 */
export class StoreOpRecorder extends ForwardingLeaseStore {
  /** The invocation being sent right now (network sends are synchronous within a call). */
  private sending: StoreOpEvent | undefined;

  constructor(
    inner: LeaseStore,
    private readonly proc: string,
    private readonly harnessClock: Clock,
    private readonly storeClock: Clock,
    private readonly history: HistoryRecorder,
    private readonly labels: LeaseLabels,
  ) {
    super(inner);
  }

  override tryAcquire(
    request: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    return this.track(
      'acquire',
      request.key,
      {
        lease: this.labels.of(request.leaseId),
        ttlMs: request.ttlMs,
        tokenBlock: blockOf(request),
        ...delayFields(request),
      },
      () => this.inner.tryAcquire(request, o),
      (a) =>
        a.status === 'acquired'
          ? { phase: 'acquired', token: a.token.toString() }
          : { phase: 'busy' },
    );
  }

  override renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    return this.track(
      'renew',
      lease.key,
      {
        lease: this.labels.of(lease.leaseId),
        token: lease.token.toString(),
        ttlMs: lease.ttlMs,
      },
      () => this.inner.renew(lease, o),
      (a) => ({ phase: a.status }),
    );
  }

  override release(lease: StoreLeaseRef, o: StoreRequestOptions): Promise<StoreReleaseResult> {
    return this.track(
      'release',
      lease.key,
      { lease: this.labels.of(lease.leaseId), token: lease.token.toString() },
      () => this.inner.release(lease, o),
      (a) => ({ phase: a.status }),
    );
  }

  /**
   * One `store_op` with `f: 'hand_off'`: one invocation, one answer, so the linearizability
   * check places its release and its grant at one instant.
   */
  protected override handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    return this.track(
      'hand_off',
      acquire.key,
      {
        lease: this.labels.of(acquire.leaseId),
        ttlMs: acquire.ttlMs,
        releaseLease: this.labels.of(release.leaseId),
        releaseToken: release.token.toString(),
        tokenBlock: blockOf(acquire),
        ...delayFields(acquire),
      },
      () => super.handOff(release, acquire, o),
      (a) =>
        a.acquired.status === 'acquired'
          ? { phase: 'acquired', token: a.acquired.token.toString(), released: a.released }
          : { phase: 'busy', released: a.released },
    );
  }

  /**
   * The network is delivering the request being sent a second time: record the copy as an
   * operation of its own that is never answered (`:info`).
   */
  duplicated(): void {
    if (this.sending !== undefined)
      this.history.record({ ...this.sending, op: this.history.newOp('o') });
  }

  private track<A>(
    f: StoreOpFunction,
    key: string,
    args: Pick<
      StoreOpEvent,
      | 'lease'
      | 'token'
      | 'ttlMs'
      | 'releaseLease'
      | 'releaseToken'
      | 'tokenBlock'
      | 'lockDelayMs'
      | 'ignoreLockDelay'
    >,
    send: () => Promise<A>,
    answer: (a: A) => Pick<StoreOpEvent, 'phase' | 'token' | 'released'>,
  ): Promise<A> {
    // Plain object literals (no spreads): this runs for every store request of every seed.
    // Fields left undefined are dropped when the history is written as JSON.
    const op = this.history.newOp('o');
    const proc = this.proc;
    let invoke: StoreOpEvent =
      f === 'hand_off'
        ? {
            type: 'store_op',
            f,
            proc,
            key,
            phase: 'invoke',
            t: this.harnessClock.now(),
            op,
            lease: args.lease,
            ttlMs: args.ttlMs,
            releaseLease: args.releaseLease,
            releaseToken: args.releaseToken,
            tokenBlock: args.tokenBlock,
            storeAt: this.storeClock.now(),
          }
        : {
            type: 'store_op',
            f,
            proc,
            key,
            phase: 'invoke',
            t: this.harnessClock.now(),
            op,
            lease: args.lease,
            token: args.token,
            ttlMs: args.ttlMs,
            tokenBlock: args.tokenBlock,
            storeAt: this.storeClock.now(),
          };
    if (args.lockDelayMs !== undefined || args.ignoreLockDelay !== undefined)
      invoke = { ...invoke, ...delayFields(args) };
    this.history.record(invoke);
    this.sending = invoke;
    let reply: Promise<A>;
    try {
      reply = send();
    } finally {
      this.sending = undefined;
    }
    void reply.then(
      (a) => {
        const got = answer(a);
        const done: StoreOpEvent = {
          type: 'store_op',
          f,
          proc,
          key,
          op,
          t: this.harnessClock.now(),
          phase: got.phase,
          token: got.token,
          storeAt: this.storeClock.now(),
        };
        this.history.record(
          got.released === undefined ? done : { ...done, released: got.released },
        );
      },
      (err: unknown) =>
        this.history.record({
          type: 'store_op',
          f,
          proc,
          key,
          op,
          phase: 'info',
          t: this.harnessClock.now(),
          storeAt: this.storeClock.now(),
          error: err instanceof Error ? err.message : String(err),
        }),
    );
    return reply;
  }
}

/** The `store_op` `tokenBlock` of a grant request: its block when above 1, else absent. */
function blockOf(request: StoreAcquireRequest): number | undefined {
  const b = request.tokenBlock;
  return b !== undefined && b > 1 ? b : undefined;
}
