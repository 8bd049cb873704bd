import type {
  StoreAcquireRequest,
  StoreQueuedOptions,
  StoreRequestOptions,
} from '../../core/store.js';
import type { HolderInfo } from '../../core/types.js';
import type { Session, SessionPool } from './session-pool.js';
import type { EtcdClient } from './client.js';
import type { EpochGate } from './epoch.js';
import { storeError } from './errors.js';
import type { HeldEntry } from './held-entries.js';
import { prefixEnd, type KeyLayout } from './keys.js';
import { aheadRange, callOptions, recheckTxn, type Kv } from './queries.js';

/** What the queue needs from its {@link EtcdLeaseStore}. */
export interface QueueHost {
  readonly client: EtcdClient;
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
export const PAGE = 16;

/** A waiter's entry in the queue, and what it last learned about the entry ahead of it. */
export interface Place {
  readonly e: HeldEntry;
  readonly session: Session;
  readonly entryKey: Buffer;
  ahead: Kv;
  /** The revision of the read that saw `ahead` alive. */
  readRev: bigint;
}

/** What a re-check found: nothing ahead (grant), an entry still ahead, or our place lost. */
export type Check =
  | { readonly kind: 'head'; readonly validFrom: number; readonly storeAt: number }
  | { readonly kind: 'behind'; readonly ahead: Kv; readonly readRev: bigint }
  | { readonly kind: 'gone' };

/**
 * The reads of a queued waiter: who is ahead of its entry, and the re-check after a wake-up
 * that decides a grant. Counts every key read it makes (a no-herd check for tests).
 */
export class QueueReads {
  /** Key reads made by queued waiters (enqueues and re-checks). */
  count = 0;

  constructor(private readonly h: QueueHost) {}

  /**
   * The re-check after a wake-up: a keepalive of our session sent after `validFrom`, and in
   * parallel a linearizable read that our entry still exists, with our create revision, on
   * our session lease, and of what is still ahead of it. Both must succeed to grant.
   */
  async check(
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
    this.count++;
    const sentAt = h.epoch.sent;
    const [alive, res] = await Promise.all([
      h.pool.confirm(session, storeAt, rt.timeoutMs, 'strict', true).catch((err: unknown) => {
        throw storeError(err);
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
      const view = h.epoch.admit(res.header, res.responses[1]?.response_range?.kvs, sentAt);
      // Queued before the fencing epoch was raised: its revision is not above the floor
      // (`leasehold epoch` deletes such entries; this one's delete may still be on its way).
      if (e.token <= view.rev) return { kind: 'gone' };
      e.base = view.base;
      return { kind: 'head', validFrom, storeAt };
    }
    return { kind: 'behind', ahead: ahead.kv, readRev: ahead.rev ?? BigInt(res.header.revision) };
  }

  /** The newest entry of exactly `key` created before `below`, in a newest-first page. */
  aheadIn(
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
  async findAhead(
    key: string,
    below: bigint,
    rt: StoreRequestOptions,
  ): Promise<{ kv: Kv; rev: bigint } | undefined> {
    const { h } = this;
    const dir = h.layout.dir(key);
    const dirEnd = prefixEnd(dir);
    let from = below;
    for (let page = 0; page < 10_000; page++) {
      this.count++;
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
}
