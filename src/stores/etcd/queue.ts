import { abortReason } from '../../core/runtime/clock.js';
import { LeaseholdError } from '../../core/errors.js';
import type {
  StoreAcquireRequest,
  StoreQueuedOptions,
  StoreQueuedResult,
  StoreRequestOptions,
} from '../../core/store.js';
import type { HolderInfo } from '../../core/types.js';
import type { Session } from './session-pool.js';
import { closedError, isLeaseNotFound, storeError } from './errors.js';
import type { HeldEntry } from './held-entries.js';
import { holderFromEntry, prefixEnd } from './keys.js';
import {
  callOptions,
  contendersRange,
  deleteByRevisionTxn,
  enqueueTxn,
  markLastTxn,
  type Kv,
} from './queries.js';
import { PAGE, QueueReads, type Place, type QueueHost } from './queue-read.js';
import { waitInQueue, type QueueSteps } from './queue-wait.js';

/** One store's waiters on one key each need their own session (lane); this many at most. */
const MAX_LANES = 256;
/** A waiter whose place vanished queues again at most this many times. */
const MAX_PLACES = 3;

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
export class EtcdQueue implements QueueSteps {
  readonly reader: QueueReads;
  /** Per key, the end of the last enqueue of this store in flight (see enqueueTurn). */
  private readonly enqueueing = new Map<string, Promise<void>>();

  constructor(readonly h: QueueHost) {
    this.reader = new QueueReads(h);
  }

  /** Key reads made by queued waiters (enqueues and re-checks): a no-herd check for tests. */
  get reads(): number {
    return this.reader.count;
  }

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
      const end = await waitInQueue(this, enq.place, request, options, rt, waitUntil);
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
        throw storeError(err);
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
      const sentAt = h.epoch.sent;
      try {
        this.reader.count++;
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
        let ahead = this.reader.aheadIn(kvs, request.key, e.token);
        if (ahead === undefined && range?.more === true) {
          ahead = await this.reader.findAhead(request.key, e.token, rt);
        }
        if (ahead === undefined) {
          // Granted by this put. The nested transaction recorded the marker if KEY/ was empty
          // (only longer keys' entries there otherwise).
          e.base = h.epoch.admit(res.header, res.responses[3]?.response_range?.kvs, sentAt).base;
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

  /** The wait ran out with an entry still ahead: leave the queue and answer busy. */
  async giveUp(place: Place, key: string, rt: StoreRequestOptions): Promise<StoreQueuedResult> {
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
  grant(e: HeldEntry, validFrom: number, storeAt: number, marked: boolean): StoreQueuedResult {
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
  async leave(place: Place): Promise<void> {
    const { h } = this;
    const { e } = place;
    e.waiting = false;
    e.ending = true;
    if (e.token === 0n) return;
    try {
      await h.run(() =>
        h.client.kv.txn(
          deleteByRevisionTxn(place.entryKey, e.token),
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

  throwIfEnded(signal: AbortSignal): void {
    if (this.h.closing.aborted) throw closedError();
    if (signal.aborted) throw abortReason(signal);
  }
}
