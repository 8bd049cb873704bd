import type { Etcd3, Watcher } from 'etcd3';
import { abortReason } from '../../core/clock.js';
import { isLeaseholdError, LeaseholdError } from '../../core/errors.js';
import type {
  StoreAcquireRequest,
  StoreQueuedOptions,
  StoreQueuedResult,
  StoreRequestOptions,
} from '../../core/store.js';
import type { HolderInfo } from '../../core/types.js';
import type { EpochGate } from './epoch.js';
import { holderFromEntry, prefixEnd, type KeyLayout } from './keys.js';
import {
  aheadRange,
  callOptions,
  contendersRange,
  enqueueTxn,
  isLeaseNotFound,
  markLastTxn,
  recheckTxn,
  toUnavailable,
  type Kv,
} from './queries.js';
import {
  closedError,
  withTimeout,
  type HeldEntry,
  type Session,
  type SessionPool,
} from './session.js';

/** What the queue needs from its {@link EtcdLeaseStore}. */
export interface QueueHost {
  readonly client: Etcd3;
  readonly layout: KeyLayout;
  readonly pool: SessionPool;
  /** The store's tracked entries, by etcd key. */
  readonly held: Map<string, HeldEntry>;
  /** Aborts when the store closes. */
  readonly closing: AbortSignal;
  entryValue(request: StoreAcquireRequest): string;
  forget(e: HeldEntry): void;
  holderInfo(kv: Kv, options: StoreRequestOptions): Promise<HolderInfo>;
  /** The fencing epoch: every granting read goes through it (epoch.ts). */
  readonly epoch: EpochGate;
  /** Runs one etcd call; failures become `ERR_UNAVAILABLE`, a closed store `ERR_CLOSED`. */
  run<T>(fn: () => Promise<T>): Promise<T>;
}

/** Contenders read per request when looking for the entry ahead of ours. */
const PAGE = 16;
/** One store's waiters on one key each need their own session (lane); this many at most. */
const MAX_LANES = 256;
/** A waiter whose place vanished queues again at most this many times. */
const MAX_PLACES = 3;

/** A waiter's entry in the queue, and what it last learned about the entry ahead of it. */
interface Place {
  readonly e: HeldEntry;
  readonly session: Session;
  readonly entryKey: Buffer;
  ahead: Kv;
  /** The revision of the read that saw `ahead` alive. */
  readRev: bigint;
}

type Check =
  | { readonly kind: 'head'; readonly validFrom: number; readonly storeAt: number }
  | { readonly kind: 'behind'; readonly ahead: Kv; readonly readRev: bigint }
  | { readonly kind: 'gone' };

type Wake = 'deleted' | 'watch' | 'gone' | 'poll' | 'deadline' | 'aborted' | 'closed';

/** A live watch on the deletion of the entry ahead, from the revision it was created at. */
interface AheadWatch {
  readonly key: string;
  readonly watcher: Watcher;
  /** etcd's revision when the watch was created: it reports every deletion after it. */
  readonly createdRev: bigint;
}

/**
 * etcd's queued lock (`concurrency.Mutex.Lock`), with the re-check Jepsen asked for.
 *
 * A waiter puts its own entry `KEY/<session hex>` on its session lease; the entries' create
 * revisions order the queue. It watches only the deletion of the entry just ahead of it (the
 * newest one created before it), so a release wakes one waiter, not all (no herd, no poll).
 * When nothing is ahead any more, it grants only after proving, from an instant `validFrom`
 * taken before sending, that (1) a keepalive of its session sent after `validFrom` succeeded
 * — the session lease, and so the entry, lives at least TTL + headroom beyond it — and
 * (2) a linearizable read after that instant still finds its entry with its create revision,
 * attached to that session. A waiter paused past its TTL finds its entry gone and queues
 * again (new entry, larger token): it is never granted on a dead lease, unlike etcd 3.4.3's
 * lock API, which returned success to such a waiter.
 */
export class EtcdQueue {
  /** Key reads made by queued waiters (enqueues and re-checks): a no-herd check for tests. */
  reads = 0;
  /** Per key, the end of the last enqueue of this store in flight (see enqueueTurn). */
  private readonly enqueueing = new Map<string, Promise<void>>();

  constructor(private readonly h: QueueHost) {}

  async acquire(
    request: StoreAcquireRequest,
    options: StoreQueuedOptions,
  ): Promise<StoreQueuedResult> {
    const waitUntil = performance.now() + options.timeoutMs;
    const rt: StoreRequestOptions = { timeoutMs: options.requestTimeoutMs, signal: options.signal };
    for (let n = 0; n < MAX_PLACES; n++) {
      this.throwIfEnded(options.signal);
      const turn = await this.enqueueTurn(request.key);
      let enq;
      try {
        this.throwIfEnded(options.signal);
        const validFrom = options.now();
        const storeAt = performance.now();
        enq = await this.enqueue(request, storeAt, rt);
        if (enq.kind === 'head') return this.grant(enq.place.e, validFrom, storeAt, enq.marked);
      } finally {
        turn();
      }
      const end = await this.wait(enq.place, request, options, rt, waitUntil);
      if (end !== 'gone') return end;
    }
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `the queued place on ${request.key} vanished ${MAX_PLACES} times (its etcd session expired or it was deleted)`,
    );
  }

  /**
   * Waits until earlier enqueues of this store on `key` have been answered, and returns the
   * function that ends this one's turn. Entries are ordered by their put's revision; two puts
   * of one store in flight at once (each after its own session round trip) could land in
   * either order, and a later waiter of the same client would overtake an earlier one.
   */
  private async enqueueTurn(key: string): Promise<() => void> {
    const before = this.enqueueing.get(key);
    let end!: () => void;
    const mine = new Promise<void>((resolve) => {
      end = resolve;
    });
    const tail = before === undefined ? mine : before.then(() => mine);
    this.enqueueing.set(key, tail);
    // An enqueue always settles (each of its requests is bounded by the request timeout).
    if (before !== undefined) await before;
    return () => {
      end();
      if (this.enqueueing.get(key) === tail) this.enqueueing.delete(key);
    };
  }

  /**
   * Puts the waiter's entry in the first lane whose session has none on this key. `head`
   * when nothing is ahead: then the put itself is the grant (the session was confirmed for
   * the full TTL from `storeAt` before it, as for a try-acquire).
   */
  private async enqueue(
    request: StoreAcquireRequest,
    storeAt: number,
    rt: StoreRequestOptions,
  ): Promise<{ kind: 'head'; place: Place; marked: boolean } | { kind: 'queued'; place: Place }> {
    const { h } = this;
    const ttlS = Math.ceil(request.ttlMs / 1000);
    const dir = h.layout.dir(request.key);
    const dirEnd = prefixEnd(dir);
    const value = h.entryValue(request);
    let leaseGone = 0;
    for (let lane = 0; lane < MAX_LANES; lane++) {
      const known = h.pool.peek(ttlS, lane);
      if (known !== undefined && h.held.has(h.layout.entry(request.key, known.hex).toString()))
        continue;
      let session: Session;
      try {
        session = await h.pool.fresh(ttlS, storeAt, rt.timeoutMs, lane);
      } catch (err) {
        throw toUnavailable(err);
      }
      const entryKey = h.layout.entry(request.key, session.hex);
      const etcdKey = entryKey.toString('utf8');
      if (h.held.has(etcdKey)) continue;
      // Reserved before the put, so no other request of this store picks the same entry.
      const e: HeldEntry = {
        etcdKey,
        key: request.key,
        leaseId: request.leaseId,
        token: 0n,
        value,
        session,
        ttlMs: request.ttlMs,
        expiresLocal: Number.POSITIVE_INFINITY,
        gone: false,
        ending: false,
        waiting: true,
        markOnRelease: false,
      };
      h.held.set(etcdKey, e);
      session.entries.set(etcdKey, e);
      let res;
      try {
        this.reads++;
        res = await h.run(() =>
          h.client.kv.txn(
            enqueueTxn({
              entryKey,
              value,
              sessionId: session.id,
              dir,
              dirEnd,
              lastKey: h.layout.last(request.key),
              epochKey: h.layout.epoch(),
              limit: PAGE,
            }),
            callOptions(rt),
          ),
        );
      } catch (err) {
        if (isLeaseNotFound((err as { cause?: unknown }).cause ?? err) && leaseGone++ < 3) {
          // The session died between its keepalive and our put; the put failed atomically.
          h.forget(e);
          h.pool.kill(session);
          lane--;
          continue;
        }
        // Unknown outcome: the put may have committed. Leave a ghost for the sweep, which
        // deletes it by its exact value (it contains our lease id).
        e.waiting = false;
        e.ending = true;
        throw err;
      }
      if (!res.succeeded) {
        // Another request of this store put this session's entry on the key first.
        h.forget(e);
        continue;
      }
      e.token = BigInt(res.header.revision);
      const range = res.responses[2]?.response_range;
      const kvs = (range?.kvs ?? []) as unknown as Kv[];
      const place: Place = { e, session, entryKey, ahead: undefined as unknown as Kv, readRev: 0n };
      try {
        let ahead = this.aheadIn(kvs, request.key, e.token);
        if (ahead === undefined && range?.more === true) {
          ahead = await this.findAhead(request.key, e.token, rt);
        }
        if (ahead === undefined) {
          // Granted by this put. The nested transaction recorded the marker if KEY/ was empty
          // (only longer keys' entries there otherwise).
          e.base = h.epoch.admit(res.header, res.responses[3]?.response_range?.kvs).base;
          const marked = res.responses[0]?.response_txn?.succeeded === true;
          return { kind: 'head', place, marked };
        }
        place.ahead = ahead.kv;
        place.readRev = ahead.rev ?? BigInt(res.header.revision);
        return { kind: 'queued', place };
      } catch (err) {
        await this.leave(place);
        throw err;
      }
    }
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `more than ${MAX_LANES} waiters of one etcd store instance on ${request.key}`,
    );
  }

  /**
   * Parks until the entry ahead is deleted, then re-checks; repeats while another entry is
   * still ahead. Returns the answer, or `gone` when our place vanished (queue again).
   */
  private async wait(
    place: Place,
    request: StoreAcquireRequest,
    options: StoreQueuedOptions,
    rt: StoreRequestOptions,
    waitUntil: number,
  ): Promise<StoreQueuedResult | 'gone'> {
    const { e, session } = place;
    const pending = new Set<Wake>();
    let wake: (() => void) | undefined;
    const notify = (why: Wake): void => {
      pending.add(why);
      wake?.();
    };
    e.onGone = () => notify('gone');
    const onAbort = (): void => notify('aborted');
    const onClose = (): void => notify('closed');
    options.signal.addEventListener('abort', onAbort, { once: true });
    this.h.closing.addEventListener('abort', onClose, { once: true });
    // The entry lives only as long as its session: keep it alive while we wait (rounds are
    // shared with every other lease and waiter on the session). TTL 0 kills the session,
    // which marks our entry gone.
    const keepEveryMs = Math.max(200, Math.floor((session.ttlS * 1000) / 3));
    const keeper = setInterval(() => {
      this.h.pool
        .confirm(session, performance.now(), rt.timeoutMs, 'strict')
        .catch(() => undefined);
    }, keepEveryMs);
    let watch: AheadWatch | undefined;
    const stopWatch = (): void => {
      if (watch === undefined) return;
      watch.watcher.removeAllListeners('delete');
      watch.watcher.removeAllListeners('connected');
      watch.watcher.on('error', () => undefined);
      watch.watcher.cancel().catch(() => undefined);
      watch = undefined;
    };
    let outcome: 'granted' | 'gone' | 'left' = 'left';
    try {
      let failures = 0;
      let recheck = false;
      for (;;) {
        this.throwIfEnded(options.signal);
        if (e.gone || session.dead) {
          outcome = 'gone';
          return 'gone';
        }
        let why: Wake | 'gap' | 'retry' = 'retry';
        try {
          if (!recheck) {
            const aheadKey = place.ahead.key.toString('utf8');
            if (watch === undefined || watch.key !== aheadKey) {
              stopWatch();
              watch = await this.watchDeletion(aheadKey, rt, notify);
            }
            if (watch.createdRev > place.readRev) {
              // Something was written between our read and the watch: the entry ahead may
              // have been deleted in that gap. Read again rather than watch from the past,
              // which etcd serves only in its 100 ms catch-up batches.
              why = 'gap';
            } else {
              options.onParked?.();
              why = await this.sleep(pending, (w) => (wake = w), waitUntil, options.pollIntervalMs);
              wake = undefined;
            }
            if (why === 'aborted' || why === 'closed') this.throwIfEnded(options.signal);
            if (why === 'gone') {
              outcome = 'gone';
              return 'gone';
            }
            if (why === 'watch') stopWatch();
          }
          const check = await this.check(place, request.key, options, rt);
          failures = 0;
          recheck = false;
          if (check.kind === 'gone') {
            outcome = 'gone';
            return 'gone';
          }
          if (check.kind === 'head') {
            outcome = 'granted';
            return this.grant(e, check.validFrom, check.storeAt, false);
          }
          place.ahead = check.ahead;
          place.readRev = check.readRev;
        } catch (err) {
          // A transient failure (a member restarting, a leader election) need not cost the
          // waiter its place: keep the entry, back off, and re-check while the wait lasts.
          const backoffMs = Math.min(1000, 50 * 2 ** failures) * (0.5 + Math.random() / 2);
          if (
            !isLeaseholdError(err, 'ERR_UNAVAILABLE') ||
            performance.now() + backoffMs >= waitUntil
          )
            throw err;
          failures++;
          recheck = true;
          stopWatch();
          await new Promise((r) => setTimeout(r, backoffMs));
          continue;
        }
        if (why === 'deadline' || performance.now() >= waitUntil) {
          return await this.giveUp(place, request.key, rt);
        }
      }
    } finally {
      clearInterval(keeper);
      stopWatch();
      e.onGone = undefined;
      options.signal.removeEventListener('abort', onAbort);
      this.h.closing.removeEventListener('abort', onClose);
      if (outcome === 'left') await this.leave(place);
      else if (outcome === 'gone') this.h.forget(e);
    }
  }

  /** Waits for the first pending reason, the backstop poll, or the end of the wait. */
  private sleep(
    pending: Set<Wake>,
    setWake: (w: () => void) => void,
    waitUntil: number,
    pollMs: number,
  ): Promise<Wake> {
    const take = (): Wake | undefined => {
      for (const w of ['aborted', 'closed', 'gone', 'deleted', 'watch', 'poll'] as const) {
        if (pending.has(w)) {
          pending.clear();
          return w;
        }
      }
      return undefined;
    };
    const ready = take();
    if (ready !== undefined) return Promise.resolve(ready);
    const left = waitUntil - performance.now();
    if (left <= 0) return Promise.resolve('deadline');
    return new Promise((resolve) => {
      const byDeadline = left <= pollMs;
      const timer = setTimeout(
        () => {
          setWake(() => undefined);
          resolve(byDeadline ? 'deadline' : 'poll');
        },
        Math.max(1, Math.min(left, pollMs)),
      );
      setWake(() => {
        const w = take();
        if (w === undefined) return;
        clearTimeout(timer);
        setWake(() => undefined);
        resolve(w);
      });
    });
  }

  /**
   * Watches the deletion of `key` from now on. The watch has no start revision, so etcd
   * adds it to its synced watchers and reports a deletion at once; `createdRev` says from
   * which revision on it covers, so the caller can tell whether its last read is covered.
   */
  private async watchDeletion(
    key: string,
    rt: StoreRequestOptions,
    notify: (why: Wake) => void,
  ): Promise<AheadWatch> {
    const watcher = this.h.client.watch().key(key).only('delete').watcher();
    let created = false;
    try {
      const createdRev = await withTimeout(
        new Promise<bigint>((resolve, reject) => {
          watcher.once('connected', (res: { header: { revision: string } }) =>
            resolve(BigInt(res.header.revision)),
          );
          watcher.once('error', reject);
        }),
        rt.timeoutMs,
        'creating an etcd watch',
      );
      created = true;
      watcher.on('delete', () => notify('deleted'));
      // After a reconnect etcd3 resumes the watch from its last revision; re-check anyway.
      watcher.on('connected', () => notify('watch'));
      watcher.on('error', () => notify('watch'));
      return { key, watcher, createdRev };
    } catch (err) {
      throw toUnavailable(err);
    } finally {
      if (!created) {
        watcher.on('error', () => undefined);
        watcher.cancel().catch(() => undefined);
      }
    }
  }

  /**
   * The re-check after a wake-up: a keepalive of our session sent after `validFrom`, and in
   * parallel a linearizable read that our entry still exists, with our create revision, on
   * our session lease, and of what is still ahead of it. Both must succeed to grant.
   */
  private async check(
    place: Place,
    key: string,
    options: StoreQueuedOptions,
    rt: StoreRequestOptions,
  ): Promise<Check> {
    const { h } = this;
    const { e, session } = place;
    const dir = h.layout.dir(key);
    const dirEnd = prefixEnd(dir);
    const validFrom = options.now();
    const storeAt = performance.now();
    this.reads++;
    const [alive, res] = await Promise.all([
      h.pool.confirm(session, storeAt, rt.timeoutMs, 'strict', true).catch((err: unknown) => {
        throw toUnavailable(err);
      }),
      h.run(() =>
        h.client.kv.txn(
          recheckTxn({
            entryKey: place.entryKey,
            token: e.token,
            sessionId: session.id,
            dir,
            dirEnd,
            epochKey: h.layout.epoch(),
            limit: PAGE,
          }),
          callOptions(rt),
        ),
      ),
    ]);
    if (!res.succeeded || !alive || e.gone) return { kind: 'gone' };
    const range = res.responses[0]?.response_range;
    let ahead = this.aheadIn(range?.kvs ?? [], key, e.token);
    if (ahead === undefined && range?.more === true) ahead = await this.findAhead(key, e.token, rt);
    if (ahead === undefined) {
      const view = h.epoch.admit(res.header, res.responses[1]?.response_range?.kvs);
      // Queued before the fencing epoch was raised: its revision is not above the floor
      // (`leasehold epoch` deletes such entries; this one's delete may still be on its way).
      if (e.token <= view.rev) return { kind: 'gone' };
      e.base = view.base;
      return { kind: 'head', validFrom, storeAt };
    }
    return { kind: 'behind', ahead: ahead.kv, readRev: ahead.rev ?? BigInt(res.header.revision) };
  }

  /** The wait ran out with an entry still ahead: leave the queue and answer busy. */
  private async giveUp(
    place: Place,
    key: string,
    rt: StoreRequestOptions,
  ): Promise<StoreQueuedResult> {
    await this.leave(place);
    const { h } = this;
    const dir = h.layout.dir(key);
    let holderKv = place.ahead;
    try {
      const res = await h.run(() =>
        h.client.kv.range(
          { ...contendersRange(dir, prefixEnd(dir)), limit: PAGE },
          callOptions(rt),
        ),
      );
      for (const kv of res.kvs as unknown as Kv[]) {
        if (h.layout.parseEntry(kv.key)?.key === key) {
          holderKv = kv;
          break;
        }
      }
    } catch {
      // the entry ahead of us at the last check stands in for the holder
    }
    let holder: HolderInfo;
    try {
      holder = await h.holderInfo(holderKv, rt);
    } catch {
      // Without its etcd lease's TTL, report the holder with the least remaining time.
      holder = holderFromEntry(
        holderKv.value.toString('utf8'),
        h.layout.parseEntry(holderKv.key)?.hex ?? '',
        1,
        BigInt(holderKv.create_revision),
      );
    }
    return { status: 'busy', holder, retryAfterMs: holder.remainingMs };
  }

  /**
   * The waiter holds. Unless the grant's own transaction recorded the last-grant marker,
   * it is recorded now, off the handoff's path, and again by the release's transaction (the
   * release may overtake it; both are conditional on our entry, so neither can overwrite a
   * later grant's marker).
   */
  private grant(
    e: HeldEntry,
    validFrom: number,
    storeAt: number,
    marked: boolean,
  ): StoreQueuedResult {
    e.waiting = false;
    if (!marked) {
      e.markOnRelease = true;
      this.markLast(e);
    }
    e.expiresLocal = storeAt + e.ttlMs;
    return {
      status: 'acquired',
      token: (e.base ?? 0n) + e.token,
      validFrom,
      expiresAtWallMs: Date.now() + e.ttlMs,
    };
  }

  /** Removes our entry (only while it is still ours); what fails is left to the sweep. */
  private async leave(place: Place): Promise<void> {
    const { h } = this;
    const { e } = place;
    e.waiting = false;
    e.ending = true;
    if (e.token === 0n) return;
    try {
      await h.run(() =>
        h.client.kv.txn(
          {
            compare: [
              {
                key: place.entryKey,
                target: 'Create',
                result: 'Equal',
                create_revision: e.token.toString(),
              },
            ],
            success: [{ request_delete_range: { key: place.entryKey } }],
            failure: [],
          },
          callOptions({ timeoutMs: 5000 }),
        ),
      );
      h.forget(e);
    } catch {
      // stays tracked as ending: the next keepalive round's sweep deletes it
    }
  }

  /** Records `e`'s token in the key's last-grant marker (for `inspect().lastToken`). */
  private markLast(e: HeldEntry): void {
    const { h } = this;
    h.run(() =>
      h.client.kv.txn(
        markLastTxn(Buffer.from(e.etcdKey), e.token, h.layout.last(e.key)),
        callOptions({ timeoutMs: 5000 }),
      ),
    ).catch(() => undefined);
  }

  /** The newest entry of exactly `key` created before `below`, in a newest-first page. */
  private aheadIn(
    kvs: readonly Kv[],
    key: string,
    below: bigint,
  ): { kv: Kv; rev: bigint | undefined } | undefined {
    for (const kv of kvs) {
      if (BigInt(kv.create_revision) >= below) continue;
      if (this.h.layout.parseEntry(kv.key)?.key === key) return { kv, rev: undefined };
    }
    return undefined;
  }

  /** Pages backwards through `KEY/` when a page held only longer keys' entries (`KEY/x/…`). */
  private async findAhead(
    key: string,
    below: bigint,
    rt: StoreRequestOptions,
  ): Promise<{ kv: Kv; rev: bigint } | undefined> {
    const { h } = this;
    const dir = h.layout.dir(key);
    const dirEnd = prefixEnd(dir);
    let from = below;
    for (let page = 0; page < 10_000; page++) {
      this.reads++;
      const res = await h.run(() =>
        h.client.kv.txn(
          { compare: [], success: [aheadRange(dir, dirEnd, from, PAGE)], failure: [] },
          callOptions(rt),
        ),
      );
      const range = res.responses[0]?.response_range;
      const kvs = (range?.kvs ?? []) as unknown as Kv[];
      for (const kv of kvs) {
        if (h.layout.parseEntry(kv.key)?.key === key)
          return { kv, rev: BigInt(res.header.revision) };
      }
      if (range?.more !== true || kvs.length === 0) return undefined;
      from = BigInt(kvs[kvs.length - 1]!.create_revision);
    }
    return undefined;
  }

  private throwIfEnded(signal: AbortSignal): void {
    if (this.h.closing.aborted) throw closedError();
    if (signal.aborted) throw abortReason(signal);
  }
}
