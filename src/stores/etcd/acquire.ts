import type { ITxnResponse } from 'etcd3';
import { LeaseholdError } from '../../core/errors.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreRequestOptions,
} from '../../core/store.js';
import type { HolderInfo } from '../../core/types.js';
import type { Session, SessionPool } from './session-pool.js';
import type { EtcdClient } from './client.js';
import { epochRangeOp, type EpochGate, type EpochView } from './epoch.js';
import { isLeaseNotFound, storeError } from './errors.js';
import type { HeldEntries } from './held-entries.js';
import { decodeEntry, prefixEnd, type KeyLayout } from './keys.js';
import { callOptions, fastAcquireTxn, putLastTxn, recipePutTxn, type Kv } from './queries.js';

/** What {@link TryAcquire} needs from its store. */
export interface TryAcquireHost {
  readonly client: EtcdClient;
  readonly layout: KeyLayout;
  readonly pool: SessionPool;
  readonly entries: HeldEntries;
  /** The fencing epoch: every granting read goes through it (epoch.ts). */
  readonly epoch: EpochGate;
  entryValue(request: StoreAcquireRequest): string;
  holderInfo(kv: Kv, options: StoreRequestOptions): Promise<HolderInfo>;
}

/** The lowest-create-revision entry that belongs to exactly `key` (not `key/x`). */
export function firstDirect(layout: KeyLayout, kvs: readonly Kv[], key: string): Kv | undefined {
  for (const kv of kvs) if (layout.parseEntry(kv.key)?.key === key) return kv;
  return undefined;
}

/**
 * A try-acquire without waiting: one transaction when nobody contends for the key, etcd's
 * Mutex recipe when only longer keys' entries live under `KEY/`. A busy answer writes
 * nothing.
 */
export class TryAcquire {
  constructor(private readonly h: TryAcquireHost) {}

  async acquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
    startedAt: number,
  ): Promise<StoreAcquireResult> {
    const ttlS = Math.ceil(request.ttlMs / 1000);
    for (let attempt = 0; attempt < 3; attempt++) {
      const session = await this.h.pool.fresh(ttlS, startedAt, options.timeoutMs);
      try {
        return await this.tryWith(session, request, options, startedAt);
      } catch (err) {
        // The session's etcd lease vanished between our keepalive and the put (it expired
        // during a pause, or was revoked): the put failed atomically. Start a new session.
        if (isLeaseNotFound(err)) {
          this.h.pool.kill(session);
          continue;
        }
        // Unknown outcome: the put may have committed. Track a ghost that the next keepalive
        // round deletes (matched by its value, which holds our lease id), so the shared
        // session cannot keep an entry nobody knows about alive (Jepsen's etcd ghost locks).
        this.h.entries.rememberGhost(session, request, startedAt);
        throw storeError(err);
      }
    }
    throw new LeaseholdError('ERR_UNAVAILABLE', `no live etcd session for ${request.key}`);
  }

  private async tryWith(
    session: Session,
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
    startedAt: number,
  ): Promise<StoreAcquireResult> {
    const { h } = this;
    const dir = h.layout.dir(request.key);
    const dirEnd = prefixEnd(dir);
    const entryKey = h.layout.entry(request.key, session.hex);
    const value = h.entryValue(request);
    const sentAt = h.epoch.sent;
    // Fast path, one round trip: if nobody contends for the key (no entry under KEY/), put
    // ours and the last-grant marker; otherwise read the contenders in create order. A
    // busy answer writes nothing.
    const res = await h.client.kv.txn(
      fastAcquireTxn({
        entryKey,
        value,
        sessionId: session.id,
        dir,
        dirEnd,
        lastKey: h.layout.last(request.key),
        epochOp: epochRangeOp(h.layout),
      }),
      callOptions(options),
    );
    const view = await this.admit(res, res.succeeded ? 2 : 1, entryKey, options, sentAt);
    if (res.succeeded) {
      const revision = BigInt(res.header.revision);
      h.entries.remember(session, entryKey, request, revision, startedAt, view.base);
      return {
        status: 'acquired',
        token: view.base + revision,
        expiresAtWallMs: Date.now() + request.ttlMs,
      };
    }
    const kvs = (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[];
    const holder = firstDirect(h.layout, kvs, request.key);
    if (holder === undefined) {
      // Only entries of longer keys (`KEY/x/…`) live under `KEY/`: take etcd's slow path.
      return this.recipePath(session, request, options, startedAt, entryKey, value);
    }
    return this.answerFor(holder, session, request, entryKey, startedAt, options, view);
  }

  /**
   * etcd's Mutex recipe, used only when `KEY/` holds entries of longer keys: put our entry if
   * absent, then check whether a lower create revision exists among KEY's own entries; if
   * so, delete ours again (conditional on its revision) and answer busy.
   */
  private async recipePath(
    session: Session,
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
    startedAt: number,
    entryKey: Buffer,
    value: string,
  ): Promise<StoreAcquireResult> {
    const { h } = this;
    const dir = h.layout.dir(request.key);
    const sentAt = h.epoch.sent;
    const res = await h.client.kv.txn(
      recipePutTxn({
        entryKey,
        value,
        sessionId: session.id,
        dir,
        dirEnd: prefixEnd(dir),
        epochOp: epochRangeOp(h.layout),
      }),
      callOptions(options),
    );
    const rangeAt = res.succeeded ? 1 : 0;
    const view = await this.admit(res, rangeAt + 1, entryKey, options, sentAt);
    const kvs = (res.responses[rangeAt]?.response_range?.kvs ?? []) as unknown as Kv[];
    const holder = firstDirect(h.layout, kvs, request.key);
    const mine = BigInt(res.header.revision);
    if (res.succeeded && holder !== undefined && holder.key.equals(entryKey)) {
      await h.client.kv.txn(putLastTxn(h.layout.last(request.key), mine), callOptions(options));
      h.entries.remember(session, entryKey, request, mine, startedAt, view.base);
      return {
        status: 'acquired',
        token: view.base + mine,
        expiresAtWallMs: Date.now() + request.ttlMs,
      };
    }
    if (res.succeeded) {
      await h.entries.deleteByRevision(entryKey, mine, options);
    }
    if (holder === undefined) {
      throw new LeaseholdError('ERR_UNAVAILABLE', `contention on ${request.key} did not settle`);
    }
    return this.answerFor(holder, session, request, entryKey, startedAt, options, view);
  }

  /**
   * The epoch a granting transaction read (its response `at`). When the store refuses (a
   * restore it noticed), an entry the transaction put is deleted again before the refusal is
   * thrown, so that it does not hold the key for other instances.
   */
  private async admit(
    res: ITxnResponse,
    at: number,
    entryKey: Buffer,
    options: StoreRequestOptions,
    sentAt: bigint,
  ): Promise<EpochView> {
    try {
      return this.h.epoch.admit(res.header, res.responses[at]?.response_range?.kvs, sentAt);
    } catch (err) {
      if (res.succeeded) {
        await this.h.entries
          .deleteByRevision(entryKey, BigInt(res.header.revision), options)
          .catch(() => undefined);
      }
      throw err;
    }
  }

  /** `acquired` for our own live entry with the same lease id (a retry), `busy` otherwise. */
  private async answerFor(
    holder: Kv,
    session: Session,
    request: StoreAcquireRequest,
    entryKey: Buffer,
    startedAt: number,
    options: StoreRequestOptions,
    view: EpochView,
  ): Promise<StoreAcquireResult> {
    const revision = BigInt(holder.create_revision);
    const decoded = decodeEntry(holder.value.toString('utf8'));
    if (!('foreign' in decoded) && decoded.leaseId === request.leaseId) {
      if (revision <= view.rev) {
        // Our own entry, from before the fencing epoch: its token is not above the floor.
        throw new LeaseholdError(
          'ERR_UNAVAILABLE',
          `the lease on ${request.key} was granted before the fencing epoch was raised; acquire it anew`,
        );
      }
      if (holder.key.equals(entryKey)) {
        this.h.entries.remember(session, entryKey, request, revision, startedAt, view.base);
      }
      return { status: 'acquired', token: view.base + revision };
    }
    const info = await this.h.holderInfo(holder, options);
    return { status: 'busy', holder: info, retryAfterMs: info.remainingMs };
  }
}
