/**
 * Real-process stories whose fault is in the network between one worker and the lease store:
 * F4 (the worker is partitioned from the store while it keeps working) and F5 (a renewal is
 * applied at the store but its answer never arrives). The network is driven through a
 * {@link StoreLink} — a TCP proxy per worker in the fault tests — and every step waits for an
 * event (an answer, a notice from a worker), never for a guessed delay, so each run plays out
 * in the same order and the unfenced control arm shows its anomaly every time.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import { RealHarness, type RealHarnessOptions, type RealWorker } from './harness.js';
import { sharedNow, type RenewCallRecord, type WorkerNotice } from './protocol.js';

/** The network between each worker and the store, as the stories drive it. */
export interface StoreLink {
  /**
   * Partitions `worker` from the store: bytes are held both ways and connections stay open,
   * so its requests hang rather than fail fast (the hard case for a lease client).
   */
  cut(worker: string): void;
  /**
   * Lets `worker`'s next request reach the store and holds every answer from then on: the
   * request is applied, its answer does not arrive.
   */
  loseNextReply(worker: string): void;
  /** Heals `worker`'s link: held bytes are delivered, late, and traffic passes again. */
  heal(worker: string): void;
  /** Bytes of the store's answers currently held back from `worker`. */
  heldReplyBytes(worker: string): number;
}

/** Options shared by the network stories. */
export interface NetworkStoryOptions extends RealHarnessOptions {
  readonly ttlMs: number;
  readonly fencing: boolean;
  /** The lease key and resource scope. */
  readonly key: string;
  readonly link: StoreLink;
}

/** A worker's `lost` notice: when its lease ended locally, why, and against which deadline. */
export interface LostNotice {
  /** Harness time of the notice. */
  readonly t: number;
  readonly reason: string;
  /** The lease's local deadline when it ended (harness scale). */
  readonly deadline: number | undefined;
  /** Harness time at which the lease's signal fired. */
  readonly signalAt: number | undefined;
}

/** What both stories report about the takeover and the late write. */
export interface NetworkStoryOutcome {
  readonly aToken: string;
  readonly bToken: string;
  readonly aLost: LostNotice;
  /** B's grant by the store's clock (its reported expiry − TTL), when the store reports one. */
  readonly bGrantAt: number | undefined;
  /** B's write (`applied` expected). */
  readonly bWrite: string;
  /** A's late write with its old token: `stale_fence` (fenced) or `applied` (control). */
  readonly aWrite: string;
  /** A's release after the link healed (`not_owner`: its lease is long gone at the store). */
  readonly aRelease: string;
  /** B's renewal after A's held requests reached the store (`renewed`: they changed nothing). */
  readonly bRenew: string;
  readonly history: readonly HistoryEvent[];
  readonly report: CheckReport;
}

function lostNotice(n: WorkerNotice): LostNotice {
  const d = n.detail ?? {};
  return {
    t: n.t,
    reason: String(d.reason),
    deadline: typeof d.deadline === 'number' ? d.deadline : undefined,
    signalAt: typeof d.signalAt === 'number' ? d.signalAt : undefined,
  };
}

/** Waits for a notice registered before the step that causes it; a failure elsewhere first must not leave it unhandled. */
function expect(worker: RealWorker, event: WorkerNotice['event']): Promise<WorkerNotice> {
  const p = worker.next(event);
  p.catch(() => undefined);
  return p;
}

/**
 * The common end of both stories: B (waiting since before the fault) takes the key once A's
 * lease has expired at the store and writes; A, which learned nothing from the store, writes
 * its result late with its old token — without rechecking its lease, as a worker that ignores
 * its signal (or a check made before the fault) would. Then the link heals: A's held requests
 * reach the store late, A releases (nothing to release), and B renews (still the holder).
 */
async function takeoverAndLateWrite(
  h: RealHarness,
  o: NetworkStoryOptions,
  a: RealWorker,
  b: RealWorker,
  ga: { token: string; lease: string },
  bAcquire: ReturnType<RealHarness['acquire']>,
  aLostNotice: Promise<WorkerNotice>,
): Promise<Omit<NetworkStoryOutcome, 'history' | 'report'>> {
  const aLost = lostNotice(await aLostNotice);
  const gb = await bAcquire;
  if (gb.status !== 'ok') throw new Error(`B could not acquire ${o.key}: ${gb.status}`);
  const bw = await h.write(b, {
    scope: o.key,
    value: "B's result",
    fenced: o.fencing,
    check: true,
    token: gb.token!,
  });
  const aw = await h.write(a, {
    scope: o.key,
    value: "A's result",
    fenced: o.fencing,
    check: false,
    token: ga.token,
  });
  o.link.heal('A');
  h.fault('heal', 'A', 'held bytes delivered late, traffic passes again');
  const aRelease = await h.release(a, o.key, ga.token, ga.lease);
  const bRenew = await h.renew(b, o.key, gb.token!, gb.lease!, o.ttlMs);
  await h.release(b, o.key, gb.token!, gb.lease!);
  return {
    aToken: ga.token,
    bToken: gb.token!,
    aLost,
    bGrantAt: gb.storeExpiresAt === undefined ? undefined : gb.storeExpiresAt - o.ttlMs,
    bWrite: String(bw.status),
    aWrite: String(aw.status),
    aRelease,
    bRenew,
  };
}

/** Options of {@link runRealPartitionStory}. */
export interface PartitionStoryOptions extends NetworkStoryOptions {
  readonly renewEveryMs: number;
}

/** What the F4 story produced. */
export interface PartitionStoryResult extends NetworkStoryOutcome {
  /** Harness time of the cut. */
  readonly cutAt: number;
  /** A's renewal calls to the store that began after the cut, with their timeouts. */
  readonly renewCallsAfterCut: readonly RenewCallRecord[];
}

/**
 * F4 with real processes: A holds the key and renews in the background; B waits for it. The
 * link between A and the store is cut (both directions held, connections open), so A's
 * renewals hang. A's lease must end at its own local deadline — its signal fires although no
 * renewal ever returns — and B gets the key once A's lease has expired at the store. A keeps
 * working and writes late with its old token: the fence rejects it; unfenced, it overwrites
 * B's result.
 */
export async function runRealPartitionStory(
  o: PartitionStoryOptions,
): Promise<PartitionStoryResult> {
  const h = new RealHarness(o);
  h.meta({ scenario: 'F4', ttlMs: o.ttlMs });
  try {
    const [a, b] = await Promise.all([h.spawn('A'), h.spawn('B')]);
    const firstRenewal = expect(a, 'renewed');
    const aLostNotice = expect(a, 'lost');
    const ga = await h.acquireGranted(a, o.key, {
      ttlMs: o.ttlMs,
      waitMs: 0,
      renewEveryMs: o.renewEveryMs,
    });
    if (ga.status !== 'ok') throw new Error(`A could not acquire ${o.key}: ${ga.status}`);
    // Renewals go through A's link before the cut, so the cut falls in a working lease.
    await firstRenewal;
    const bAcquire = h.acquire(b, o.key, {
      ttlMs: o.ttlMs,
      waitMs: 10 * o.ttlMs,
      renewEveryMs: o.renewEveryMs,
    });
    bAcquire.catch(() => undefined);
    o.link.cut('A');
    const cutAt = sharedNow();
    h.fault('partition', 'A', 'client↔store bytes held both ways, connections open');
    const tail = await takeoverAndLateWrite(
      h,
      o,
      a,
      b,
      { token: ga.token!, lease: ga.lease! },
      bAcquire,
      aLostNotice,
    );
    const status = await a.request({ cmd: 'status' });
    const calls = (status.renewCalls ?? []) as RenewCallRecord[];
    const { history, report } = await h.finish();
    return {
      ...tail,
      cutAt,
      renewCallsAfterCut: calls.filter((c) => c.t >= cutAt && c.t <= tail.aLost.t),
      history,
      report,
    };
  } finally {
    await Promise.all(h.workers.map((w) => w.kill()));
  }
}

/** Options of {@link runRealLostReplyStory}. */
export interface LostReplyStoryOptions extends NetworkStoryOptions {
  /**
   * How long after the confirmed retry the second ambiguous renewal goes out, so that the
   * store's expiry from that renewal is measurably later than the one A knows of (B's grant
   * shows which one the store kept). Defaults to TTL / 4.
   */
  readonly ageMs?: number;
}

/** One ambiguous renewal: what A was told, and whether the store's answer was held back. */
export interface UnknownRenewal {
  /** What A's `renew()` returned: `unavailable` — unknown, not success. */
  readonly status: string;
  /** Did the store call get an answer before the client gave up? */
  readonly answered: boolean | undefined;
  /** Bytes of the store's answer held back from A when `renew()` returned. */
  readonly heldReplyBytes: number;
  /** Harness time just before the renewal was sent. */
  readonly invokedAt: number;
  /** The history op of the renewal (it has no outcome event: `:info`, or `unavailable`). */
  readonly op: string;
}

/** What the F5 story produced. */
export interface LostReplyStoryResult extends NetworkStoryOutcome {
  /** A's deadline from its acquire. */
  readonly acquireDeadline: number;
  readonly first: UnknownRenewal;
  /** A's deadline, and whether its lease was valid, right after the first ambiguous renewal. */
  readonly afterFirst: { readonly deadline: number; readonly valid: boolean };
  /** The retry of the same lease once the link healed (`renewed`, same lease id and token). */
  readonly retry: { readonly status: string; readonly deadline: number };
  readonly second: UnknownRenewal;
}

/**
 * F5 with real processes: A holds the key without background renewal (so that A sends only
 * what the story asks for). A renews at once; the request reaches the store and is applied, its
 * answer is held back: A must treat the renewal as unknown — `unavailable`, its deadline
 * unchanged. The link heals and A retries the same lease: the store accepts it again
 * (idempotent). A while later a second renewal's answer is lost for good: A's lease ends at its own
 * deadline, although the store extended it; B gets the key only after the store's (later)
 * expiry, and A's late write with its old token is rejected by the fence — unfenced, it
 * overwrites B's result.
 */
export async function runRealLostReplyStory(
  o: LostReplyStoryOptions,
): Promise<LostReplyStoryResult> {
  const h = new RealHarness(o);
  h.meta({ scenario: 'F5', ttlMs: o.ttlMs });
  const ageMs = o.ageMs ?? Math.floor(o.ttlMs / 4);
  const ambiguous = async (
    a: RealWorker,
    ga: { token: string; lease: string },
  ): Promise<UnknownRenewal> => {
    o.link.loseNextReply('A');
    h.fault('lose_reply', 'A', "the next request reaches the store; the store's answers are held");
    const invokedAt = sharedNow();
    const r = await h.renewDetailed(a, o.key, ga.token, ga.lease, o.ttlMs);
    return {
      status: r.status,
      answered: r.answered,
      heldReplyBytes: o.link.heldReplyBytes('A'),
      invokedAt,
      op: r.op,
    };
  };
  try {
    const [a, b] = await Promise.all([h.spawn('A'), h.spawn('B')]);
    const aLostNotice = expect(a, 'lost');
    const got = await h.acquireGranted(a, o.key, { ttlMs: o.ttlMs, waitMs: 0, autoRenew: false });
    if (got.status !== 'ok') throw new Error(`A could not acquire ${o.key}: ${got.status}`);
    const ga = { token: got.token!, lease: got.lease! };
    const first = await ambiguous(a, ga);
    const st = await a.request({ cmd: 'status' });
    const afterFirst = { deadline: Number(st.deadline), valid: st.valid === true };
    o.link.heal('A');
    h.fault('heal', 'A', 'the held answer arrives late; traffic passes again');
    const retried = await h.renewDetailed(a, o.key, ga.token, ga.lease, o.ttlMs);
    // Real time passes so the lease ages at the store; no race is being waited out.
    await sleep(ageMs);
    const second = await ambiguous(a, ga);
    const bAcquire = h.acquire(b, o.key, {
      ttlMs: o.ttlMs,
      waitMs: 10 * o.ttlMs,
      renewEveryMs: Math.floor(o.ttlMs / 4),
    });
    bAcquire.catch(() => undefined);
    const tail = await takeoverAndLateWrite(h, o, a, b, ga, bAcquire, aLostNotice);
    const { history, report } = await h.finish();
    return {
      ...tail,
      acquireDeadline: got.deadline!,
      first,
      afterFirst,
      retry: { status: retried.status, deadline: retried.deadline },
      second,
      history,
      report,
    };
  } finally {
    await Promise.all(h.workers.map((w) => w.kill()));
  }
}
