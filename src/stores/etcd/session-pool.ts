import { LeaseholdError } from '../../core/errors.js';
import type { EtcdClient } from './client.js';
import { answerWithin } from '../../core/runtime/answer-within.js';
import { closedError } from './errors.js';
import type { HeldEntry } from './held-entries.js';
import { leaseHex } from './keys.js';

interface Round {
  readonly session: Session;
  readonly sentAt: number;
  /** How long the round may wait for its answer before the stream is declared stuck. */
  readonly timeoutMs: number;
  readonly done: Promise<boolean>;
  resolve(ok: boolean): void;
  reject(err: unknown): void;
}

/**
 * One etcd lease shared by every entry this store instance holds with the same TTL (in whole
 * seconds). Its etcd TTL is the entries' TTL plus a headroom, so that a keepalive sent up to
 * `reuseWindowMs` before an acquire still covers that acquire's full TTL. Renewals wait for a
 * keepalive sent after they began, but share it: rounds go out at most once per
 * `roundGapMs`, so renewing 10,000 leases costs a bounded number of keepalives per second,
 * not one per lease.
 */
export class Session {
  readonly hex: string;
  /** The slot of the session among those of the same TTL (see {@link SessionPool.fresh}). */
  readonly lane: number;
  dead = false;
  /** Local monotonic time at which the last successful keepalive (or the grant) was sent. */
  lastOkSentAt: number;
  /** Local monotonic time at which the last round (answered or not) was sent. */
  lastRoundSentAt = Number.NEGATIVE_INFINITY;
  readonly entries = new Map<string, HeldEntry>();
  next: Round | undefined;
  /** The timer that sends `next` once the round gap has passed. */
  nextTimer: ReturnType<typeof setTimeout> | undefined;
  inflight: Round | undefined;

  constructor(
    readonly id: string,
    readonly ttlS: number,
    readonly etcdTtlS: number,
    grantSentAt: number,
    lane = 0,
  ) {
    this.hex = leaseHex(id);
    this.lastOkSentAt = grantSentAt;
    this.lane = lane;
  }
}

/** Options of a {@link SessionPool}. */
export interface SessionPoolOptions {
  readonly client: EtcdClient;
  readonly now: () => number;
  /** Extra etcd TTL over the requested TTL, in whole seconds. */
  readonly headroomS: number;
  /** How old a keepalive may be and still cover a new acquire (headroom minus a safety margin). */
  readonly reuseWindowMs: number;
  /** The shortest time between two keepalive rounds of one session. */
  readonly roundGapMs: number;
  /** Called once per keepalive round, before it is sent (the store sweeps stale entries). */
  readonly onRound: (session: Session) => void;
  /** Called when etcd says a session's lease is gone: every entry in it is lost. */
  readonly onDead: (session: Session) => void;
}

type KeepAliveStream = Awaited<ReturnType<EtcdClient['leaseClient']['leaseKeepAlive']>>;

/**
 * The sessions of one store instance: grants them, keeps them alive in coalesced rounds over
 * one keepalive stream, and declares them dead when etcd no longer knows their lease.
 */
export class SessionPool {
  /** Live sessions by slot (`ttlS/lane`). */
  private readonly bySlot = new Map<string, Session>();
  private readonly granting = new Map<string, Promise<Session>>();
  private stream: KeepAliveStream | undefined;
  private streamOpening: Promise<KeepAliveStream> | undefined;
  /** Rounds awaiting their answer, in the order they were written (etcd answers in order). */
  private readonly fifo: Round[] = [];
  private closed = false;
  /** Keepalive requests written, for the renewal-traffic benchmark. */
  keepAlivesSent = 0;

  constructor(private readonly o: SessionPoolOptions) {}

  sessions(): Session[] {
    return [...this.bySlot.values()];
  }

  /** The live session in a slot, if any, without confirming it. */
  peek(ttlS: number, lane: number): Session | undefined {
    const s = this.bySlot.get(slotOf(ttlS, lane));
    return s === undefined || s.dead ? undefined : s;
  }

  /**
   * A live session for entries of `ttlS` seconds whose lease is confirmed to last at least
   * until `startedAt + ttlS` at the store: reuses a recent keepalive, joins or starts a round,
   * or grants a new lease.
   *
   * Lane 0 is the session every acquire and renewal of that TTL shares. An entry's key is
   * `KEY/<session hex>`, so a session holds at most one entry per key: queued waiters of one
   * store on a key that already has this store's entry in lane 0 take lane 1, 2, … (one more
   * etcd lease each, as etcd's `concurrency` needs one session per concurrent `Mutex.Lock`).
   * A lane nobody uses is no longer kept alive and lapses at etcd on its own.
   */
  async fresh(ttlS: number, startedAt: number, timeoutMs: number, lane = 0): Promise<Session> {
    const s = this.bySlot.get(slotOf(ttlS, lane));
    if (s !== undefined && !s.dead && (await this.confirm(s, startedAt, timeoutMs, 'reuse')))
      return s;
    return this.grant(ttlS, timeoutMs, lane);
  }

  /**
   * True when a keepalive of `s` succeeded that was sent no earlier than `startedAt` (`strict`:
   * renewals, so that a session revoked or expired before the renewal began is never reported
   * alive) or `startedAt - reuseWindowMs` (`reuse`: acquires, whose put fails atomically on a
   * dead lease anyway); sends one if needed. False when etcd says the lease is gone.
   *
   * `urgent` sends the round now instead of after the round gap: a queued waiter reaching
   * the head of its queue must not wait up to `renewBatchMs` for its handoff (grants are
   * bounded by releases, so this cannot multiply renewal traffic).
   */
  confirm(
    s: Session,
    startedAt: number,
    timeoutMs: number,
    mode: 'strict' | 'reuse',
    urgent = false,
  ): Promise<boolean> {
    if (s.dead) return Promise.resolve(false);
    const floor = mode === 'strict' ? startedAt : startedAt - this.o.reuseWindowMs;
    if (s.lastOkSentAt >= floor) return Promise.resolve(true);
    if (s.inflight !== undefined && s.inflight.sentAt >= floor) return s.inflight.done;
    if (s.next !== undefined && urgent && s.nextTimer !== undefined) {
      clearTimeout(s.nextTimer);
      s.nextTimer = undefined;
      void this.send(s);
    }
    if (s.next === undefined) {
      let resolve!: (ok: boolean) => void;
      let reject!: (err: unknown) => void;
      const done = new Promise<boolean>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      // A keepalive stuck on a paused or partitioned member must not eat the whole lease:
      // give up after a third of the TTL, drop the stream and let the caller retry (the
      // next stream picks a member at random).
      const roundTimeoutMs = Math.min(timeoutMs, Math.max(300, Math.floor((s.ttlS * 1000) / 3)));
      // sentAt is taken when the round is written, which is after every joined request began.
      const round = {
        session: s,
        sentAt: Number.NaN,
        timeoutMs: roundTimeoutMs,
        done,
        resolve,
        reject,
      } as Round;
      s.next = round;
      // Renewals arriving until the round goes out share it; rounds are spaced by roundGapMs.
      const waitMs = urgent ? 0 : Math.max(0, s.lastRoundSentAt + this.o.roundGapMs - this.o.now());
      if (waitMs === 0) {
        void this.send(s);
      } else {
        s.nextTimer = setTimeout(() => {
          s.nextTimer = undefined;
          void this.send(s);
        }, waitMs);
      }
      return round.done;
    }
    return s.next.done;
  }

  private async send(s: Session): Promise<void> {
    const pending = s.next;
    if (pending === undefined) return;
    s.next = undefined;
    const timeoutMs = pending.timeoutMs;
    try {
      this.o.onRound(s);
      const stream = await this.openStream(timeoutMs);
      const round: Round = { ...pending, sentAt: this.o.now() };
      s.lastRoundSentAt = round.sentAt;
      s.inflight = round;
      this.fifo.push(round);
      this.keepAlivesSent++;
      const timer = setTimeout(() => {
        // No answer in time: the stream is suspect (a paused or partitioned member). Drop it
        // so the next round reconnects, possibly to another member.
        this.resetStream(
          new LeaseholdError('ERR_UNAVAILABLE', `etcd keepalive not answered in ${timeoutMs}ms`),
        );
      }, timeoutMs);
      round.done.finally(() => clearTimeout(timer)).catch(() => undefined);
      stream.write({ ID: s.id });
    } catch (err) {
      pending.reject(err);
    }
  }

  private openStream(timeoutMs: number): Promise<KeepAliveStream> {
    if (this.closed) return Promise.reject(closedError());
    if (this.stream !== undefined) return Promise.resolve(this.stream);
    this.streamOpening ??= (async () => {
      try {
        const stream = await answerWithin(
          this.o.client.leaseClient.leaseKeepAlive(),
          timeoutMs,
          'opening the etcd keepalive stream',
        );
        stream.on('data', (res: { ID?: string | number; TTL?: string | number }) => {
          this.onAnswer(res);
        });
        const fail = (err: unknown): void => {
          if (this.stream === stream) this.resetStream(err);
        };
        stream.on('error', fail);
        stream.on('end', () =>
          fail(new LeaseholdError('ERR_UNAVAILABLE', 'etcd keepalive stream ended')),
        );
        this.stream = stream;
        return stream;
      } finally {
        this.streamOpening = undefined;
      }
    })();
    return this.streamOpening;
  }

  private onAnswer(res: { ID?: string | number; TTL?: string | number }): void {
    const round = this.fifo.shift();
    if (round === undefined) return;
    const s = round.session;
    if (s.inflight === round) s.inflight = undefined;
    if (String(res.ID) !== s.id) {
      this.resetStream(new LeaseholdError('ERR_PROTOCOL', 'etcd keepalive answers out of order'));
      round.reject(new LeaseholdError('ERR_UNAVAILABLE', 'etcd keepalive answers out of order'));
      return;
    }
    if (Number(res.TTL ?? 0) > 0) {
      s.lastOkSentAt = Math.max(s.lastOkSentAt, round.sentAt);
      round.resolve(true);
    } else {
      this.kill(s);
      round.resolve(false);
    }
  }

  private resetStream(err: unknown): void {
    const stream = this.stream;
    this.stream = undefined;
    const rounds = this.fifo.splice(0);
    for (const r of rounds) {
      if (r.session.inflight === r) r.session.inflight = undefined;
      r.reject(err);
    }
    if (stream !== undefined) {
      const raw = stream as unknown as NodeJS.EventEmitter & { end(): void; cancel?: () => void };
      raw.removeAllListeners('data');
      raw.on('error', () => undefined);
      try {
        raw.cancel?.();
        raw.end();
      } catch {
        // already broken
      }
    }
  }

  /** Marks `s` dead: its entries are lost. A later request grants a new session. */
  kill(s: Session): void {
    if (s.dead) return;
    s.dead = true;
    const slot = slotOf(s.ttlS, s.lane);
    if (this.bySlot.get(slot) === s) this.bySlot.delete(slot);
    this.o.onDead(s);
  }

  private grant(ttlS: number, timeoutMs: number, lane: number): Promise<Session> {
    const slot = slotOf(ttlS, lane);
    let p = this.granting.get(slot);
    if (p === undefined) {
      p = (async () => {
        try {
          const sentAt = this.o.now();
          const etcdTtlS = ttlS + this.o.headroomS;
          const res = await this.o.client.leaseClient.leaseGrant(
            { TTL: etcdTtlS, ID: 0 },
            { deadline: new Date(Date.now() + timeoutMs) },
          );
          if (this.closed) {
            await this.o.client.leaseClient.leaseRevoke({ ID: res.ID }).catch(() => undefined);
            throw closedError();
          }
          const s = new Session(String(res.ID), ttlS, etcdTtlS, sentAt, lane);
          // A session replaced here was not confirmed alive: nobody keeps it alive any more,
          // so it lapses at etcd on its own (with any entry it still had).
          this.bySlot.set(slot, s);
          return s;
        } finally {
          this.granting.delete(slot);
        }
      })();
      this.granting.set(slot, p);
    }
    return p;
  }

  /** Revokes every session (deleting their entries at once) and closes the stream. */
  async close(timeoutMs: number): Promise<void> {
    this.closed = true;
    this.resetStream(closedError());
    const sessions = [...this.bySlot.values()];
    this.bySlot.clear();
    for (const s of sessions) if (s.nextTimer !== undefined) clearTimeout(s.nextTimer);
    await Promise.all(
      sessions.map((s) =>
        this.o.client.leaseClient
          .leaseRevoke({ ID: s.id }, { deadline: new Date(Date.now() + timeoutMs) })
          .catch(() => undefined),
      ),
    );
  }
}

function slotOf(ttlS: number, lane: number): string {
  return `${ttlS}/${lane}`;
}
