import type { StoreAcquireRequest, StoreLeaseRef, StoreRequestOptions } from '../../core/store.js';
import type { EtcdClient } from './client.js';
import type { Session, SessionPool } from './session-pool.js';
import type { KeyLayout } from './keys.js';
import { callOptions, deleteByRevisionTxn, deleteByValueTxn } from './queries.js';

/** One contender entry this store instance holds, and what it needs to renew or sweep it. */
export interface HeldEntry {
  /** The etcd key of the entry (`NS + key + "/" + hex`). */
  readonly etcdKey: string;
  readonly key: string;
  readonly leaseId: string;
  /**
   * The entry's create revision (a grant's token); 0n for a ghost (an acquire whose outcome is
   * unknown) and for a queued waiter's entry until its put is answered.
   */
  token: bigint;
  /** The fencing epoch's base when it was granted (epoch.ts): its token is base + `token`. */
  base?: bigint;
  /** The entry's exact value (it contains the lease id): deletes of ghosts compare it. */
  readonly value: string;
  readonly session: Session;
  /** Requested TTL in ms. */
  ttlMs: number;
  /**
   * Local monotonic time after which the owner has certainly given the lease up: the last
   * renew (or acquire) call plus its TTL. Never earlier than the client's own deadline, which
   * is measured from before that call. Past it, the store deletes the entry (sweep).
   */
  expiresLocal: number;
  /** Set when the entry's deletion was observed (release, sweep, operator `etcdctl del`). */
  gone: boolean;
  /**
   * Set while a queued waiter owns the entry and has not been granted yet: the waiter keeps
   * it alive and removes it itself, so the sweep leaves it alone.
   */
  waiting: boolean;
  /**
   * Granted without the last-grant marker in the same transaction (after queueing): its
   * release records the marker too, in the delete's transaction.
   */
  markOnRelease: boolean;
  /**
   * The delete of this entry in flight, if any. A release and the sweep before a keepalive
   * round share it: a second delete would find the entry gone, and whichever reached etcd
   * first would decide which caller is told the entry was never there.
   */
  deleting?: Promise<boolean> | undefined;
  /** Called once when the entry is found gone (deleted, or its session died). */
  onGone?: (() => void) | undefined;
  /**
   * Set once the owner released it, it was found expired, or it is a ghost: it only waits
   * for its deletion to succeed. It stays tracked until then, because a shared session would
   * otherwise keep an untracked entry alive for as long as any other lease is renewed.
   */
  ending: boolean;
}

/** What {@link HeldEntries} needs from its store. */
export interface HeldEntriesHost {
  readonly client: EtcdClient;
  readonly layout: KeyLayout;
  readonly pool: SessionPool;
  /** The value of the entry an acquire puts (it contains the lease id). */
  entryValue(request: StoreAcquireRequest): string;
  /** Runs one etcd call; failures become `ERR_UNAVAILABLE`, a closed store `ERR_CLOSED`. */
  run<T>(fn: () => Promise<T>): Promise<T>;
}

/**
 * The contender entries one store instance holds, by etcd key, and their ends: deleted on
 * release, or by the sweep before a keepalive round when released-but-not-deleted, a ghost,
 * or past their TTL since their last renewal. None may ride along on a shared session that
 * other leases keep alive.
 */
export class HeldEntries {
  /** Entries this instance holds, by etcd key. */
  readonly byKey = new Map<string, HeldEntry>();

  constructor(private readonly h: HeldEntriesHost) {}

  /** Tracks a granted entry (again: a retry of the same grant is tracked once). */
  remember(
    session: Session,
    entryKey: Buffer,
    request: StoreAcquireRequest,
    token: bigint,
    startedAt: number,
    base: bigint,
  ): void {
    const etcdKey = entryKey.toString('utf8');
    const prior = this.byKey.get(etcdKey);
    if (prior !== undefined && prior.token === token) return;
    const e: HeldEntry = {
      etcdKey,
      key: request.key,
      leaseId: request.leaseId,
      token,
      base,
      value: this.h.entryValue(request),
      session,
      ttlMs: request.ttlMs,
      expiresLocal: startedAt + request.ttlMs,
      gone: false,
      ending: false,
      waiting: false,
      markOnRelease: false,
    };
    this.byKey.set(etcdKey, e);
    session.entries.set(etcdKey, e);
  }

  /** Tracks an entry an acquire may or may not have written, for deletion by value. */
  rememberGhost(session: Session, request: StoreAcquireRequest, startedAt: number): void {
    const etcdKey = this.h.layout.entry(request.key, session.hex).toString('utf8');
    if (this.byKey.has(etcdKey)) return;
    const e: HeldEntry = {
      etcdKey,
      key: request.key,
      leaseId: request.leaseId,
      token: 0n,
      value: this.h.entryValue(request),
      session,
      ttlMs: request.ttlMs,
      expiresLocal: startedAt,
      gone: false,
      ending: true,
      waiting: false,
      markOnRelease: false,
    };
    this.byKey.set(etcdKey, e);
    session.entries.set(etcdKey, e);
  }

  /** The tracked entry of `lease` (same key, lease id and token), in any session. */
  find(lease: StoreLeaseRef): HeldEntry | undefined {
    for (const s of this.h.pool.sessions()) {
      const e = this.byKey.get(this.h.layout.entry(lease.key, s.hex).toString('utf8'));
      if (e === undefined || e.leaseId !== lease.leaseId) continue;
      if ((e.base ?? 0n) + e.token === lease.token) return e;
    }
    return undefined;
  }

  forget(e: HeldEntry): void {
    if (this.byKey.get(e.etcdKey) === e) this.byKey.delete(e.etcdKey);
    if (e.session.entries.get(e.etcdKey) === e) e.session.entries.delete(e.etcdKey);
  }

  /** Marks `e` gone (its deletion was observed, or etcd went back in time), and says so once. */
  lose(e: HeldEntry): void {
    e.gone = true;
    this.forget(e);
    e.onGone?.();
  }

  /** Ends an entry for good: deleted now if possible, else by a later keepalive round. */
  async drop(e: HeldEntry, options: StoreRequestOptions): Promise<void> {
    e.ending = true;
    try {
      await this.deleteOnce(e, options);
      this.forget(e);
    } catch {
      // stays tracked; the next round's sweep retries
    }
  }

  /**
   * Before each keepalive round: deletes entries that are released-but-not-deleted, ghosts,
   * and entries whose TTL has passed since their last renewal. Those must not ride along on
   * a session that other leases keep alive. An entry whose delete is in flight (a release)
   * is left to that delete.
   */
  sweep(s: Session): void {
    const now = performance.now();
    for (const e of [...s.entries.values()]) {
      if (e.waiting || e.deleting !== undefined) continue;
      if (e.ending || now > e.expiresLocal) {
        void this.drop(e, { timeoutMs: 5000, signal: new AbortController().signal });
      }
    }
  }

  /**
   * Deletes a tracked entry, sharing a delete already in flight for it (see
   * {@link HeldEntry.deleting}); a delete that fails may be sent again.
   */
  deleteOnce(e: HeldEntry, options: StoreRequestOptions): Promise<boolean> {
    if (e.deleting !== undefined) return e.deleting;
    const p = this.deleteEntry(e, options);
    e.deleting = p;
    p.catch(() => {
      if (e.deleting === p) e.deleting = undefined;
    });
    return p;
  }

  /** Deletes a tracked entry: by create revision, or by its exact value for a ghost. */
  private async deleteEntry(e: HeldEntry, options: StoreRequestOptions): Promise<boolean> {
    if (e.token !== 0n) {
      const mark = e.markOnRelease ? this.h.layout.last(e.key) : undefined;
      return this.deleteByRevision(Buffer.from(e.etcdKey), e.token, options, mark);
    }
    const key = Buffer.from(e.etcdKey);
    const res = await this.h.run(() =>
      this.h.client.kv.txn(deleteByValueTxn(key, e.value), callOptions(options)),
    );
    return res.succeeded;
  }

  /**
   * Deletes `key` only while its create revision is still `token`; with `markLast`, records
   * `token` as the key's last grant in the same transaction.
   */
  async deleteByRevision(
    key: Buffer,
    token: bigint,
    options: StoreRequestOptions,
    markLast?: Buffer,
  ): Promise<boolean> {
    const res = await this.h.run(() =>
      this.h.client.kv.txn(deleteByRevisionTxn(key, token, markLast), callOptions(options)),
    );
    return res.succeeded;
  }
}
