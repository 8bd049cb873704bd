import { setMaxListeners } from 'node:events';
import type {
  LeaseStore,
  QueueingLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreQueuedOptions,
  StoreQueuedResult,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
} from '../../core/store.js';
import type { HolderInfo, LeaseState, StoreCapabilities } from '../../core/types.js';
import { TryAcquire, firstDirect } from './acquire.js';
import { SessionPool } from './session-pool.js';
import { openEtcdClient, type EtcdClient, type EtcdWatcher } from './client.js';
import { EpochGate, epochRangeOp } from './epoch.js';
import { closedError, storeError } from './errors.js';
import { HeldEntries } from './held-entries.js';
import { decodeEntry, encodeEntry, holderFromEntry, KeyLayout, prefixEnd } from './keys.js';
import { watchContenders, watchNamespaceDeletes } from './notify.js';
import { resolveEtcdStoreOptions, type EtcdLeaseStoreOptions } from './options.js';
import { callOptions, contendersRange, readTxn, type Kv } from './queries.js';
import { EtcdQueue } from './queue.js';

/**
 * A lease store on etcd v3, following etcd's own lock recipe (`concurrency.Mutex`): a
 * contender entry `KEY/<etcd lease hex>` attached to the owner's etcd lease; the entry with
 * the lowest create revision holds KEY. So `etcdctl lock KEY`, Go's `concurrency.Mutex` and
 * leasehold exclude each other.
 *
 * - Tokens are the holding entry's create revision — etcd's cluster-wide revision, committed
 *   by the Raft quorum before it is returned, strictly increasing across leader changes —
 *   plus the base of the fencing epoch (0 until `leasehold epoch` runs; see epoch.ts), read
 *   in the same transaction. An instance that sees etcd go back in time (a snapshot restore)
 *   refuses to grant until the epoch is raised.
 * - Expiry is etcd's lease TTL (whole seconds, by the etcd leader's clock). Leases of one
 *   store instance with the same TTL share one etcd lease (a session): renewals share
 *   keepalive rounds, at most one per session per `renewBatchMs`, whatever the number of
 *   leases. A renewal is answered only by a keepalive sent after it began, so a session
 *   revoked or expired before it is never reported alive. A lease that is no longer
 *   renewed while its session lives on is deleted by the store itself once its TTL has
 *   passed since its last renewal; if the process dies, the session expires with all its
 *   entries.
 * - When etcd reports a session's lease gone (expired during a pause, revoked), every lease
 *   in it answers `lost` to its next renewal, so each one's signal fires.
 * - A busy answer is a read (one transaction whose compare fails, plus a TTL lookup): no
 *   write, no revision.
 * - Reads are linearizable (etcd's default), never serializable: no decision is made from a
 *   stale member.
 *
 * @example
 * const store = new EtcdLeaseStore({ hosts: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'] });
 * const client = new LeaseClient({ store });
 * const r = await client.acquire('jobs/nightly', { ttl: '10s', wait: '30s' });
 */
export class EtcdLeaseStore implements LeaseStore, QueueingLeaseStore {
  readonly kind = 'etcd';
  readonly capabilities: StoreCapabilities;
  /** The etcd client (yours if you passed one). */
  readonly client: EtcdClient;
  private readonly ownsClient: boolean;
  private readonly layout: KeyLayout;
  private readonly pool: SessionPool;
  private readonly headroomMs: number;
  private readonly entries: HeldEntries;
  private readonly attempt: TryAcquire;
  private readonly queue: EtcdQueue;
  /**
   * The fencing epoch and the restore check (epoch.ts). A restore ends every lease this
   * instance holds or waits for: what etcd says about them now predates what we knew.
   */
  private readonly epoch = new EpochGate(() => {
    for (const e of [...this.entries.byKey.values()]) this.entries.lose(e);
  });
  private readonly closing = new AbortController();
  private deleteWatch: Promise<EtcdWatcher> | undefined;
  private closed = false;

  constructor(options: EtcdLeaseStoreOptions = {}) {
    const o = resolveEtcdStoreOptions(options);
    this.headroomMs = o.headroomMs;
    this.capabilities = Object.freeze({
      timeAuthority: 'store',
      tokenDurability: 'replicated',
      watch: 'push',
      sharedAcrossProcesses: true,
      minTtlMs: o.minTtlMs,
      ttlGranularityMs: 1000,
      // A session lease outlives its entries by the headroom, and the leader checks for
      // expired leases every 500 ms.
      expiryLagMs: this.headroomMs + 500,
      // etcd answers TTLs, not instants: expiresAtWallMs below is this client's clock.
      expiryObservedBy: 'client',
    });
    this.ownsClient = o.client === undefined;
    this.client = o.client ?? openEtcdClient(o.hosts, o.clientOptions);
    this.layout = new KeyLayout(o.namespace);
    this.pool = new SessionPool({
      client: this.client,
      now: () => performance.now(),
      headroomS: o.headroomS,
      reuseWindowMs: o.reuseWindowMs,
      roundGapMs: o.renewBatchMs,
      onRound: (s) => this.entries.sweep(s),
      onDead: (s) => {
        const entries = [...s.entries.values()];
        s.entries.clear();
        for (const e of entries) {
          e.gone = true;
          this.entries.byKey.delete(e.etcdKey);
          e.onGone?.();
        }
      },
    });
    const host = {
      client: this.client,
      layout: this.layout,
      pool: this.pool,
      entryValue: (r: StoreAcquireRequest) => this.valueOf(r),
      run: <T>(fn: () => Promise<T>) => this.run(fn),
    };
    this.entries = new HeldEntries(host);
    this.attempt = new TryAcquire({
      ...host,
      entries: this.entries,
      epoch: this.epoch,
      holderInfo: (kv, opts) => this.holderInfo(kv, opts),
    });
    // Every queued waiter listens for close; many at once is normal, not a leak.
    setMaxListeners(0, this.closing.signal);
    this.queue = new EtcdQueue({
      ...host,
      held: this.entries.byKey,
      closing: this.closing.signal,
      forget: (e) => this.entries.forget(e),
      holderInfo: (kv, opts) => this.holderInfo(kv, opts),
      epoch: this.epoch,
    });
  }

  /** Keepalive requests sent so far (all sessions): renewal traffic, for benchmarks. */
  get keepAlivesSent(): number {
    return this.pool.keepAlivesSent;
  }

  /** Key reads made by queued waiters so far (enqueues and re-checks), for tests. */
  get queuedReads(): number {
    return this.queue.reads;
  }

  /**
   * Waits in etcd's own lock queue (see {@link EtcdQueue}): puts this waiter's entry, watches
   * only the deletion of the entry just ahead, and grants after re-checking that the entry
   * and its session lease are still alive.
   */
  async acquireQueued(
    request: StoreAcquireRequest,
    options: StoreQueuedOptions,
  ): Promise<StoreQueuedResult> {
    this.assertOpen();
    await this.ensureDeleteWatch(options.requestTimeoutMs);
    return this.queue.acquire(request, options);
  }

  async tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.assertOpen();
    const startedAt = performance.now();
    await this.ensureDeleteWatch(options.timeoutMs);
    return this.attempt.acquire(request, options, startedAt);
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.assertOpen();
    const startedAt = performance.now();
    const e = this.entries.find(lease);
    if (e === undefined || e.ending) return { status: 'lost' };
    if (startedAt > e.expiresLocal) {
      // Its TTL has passed since the last renewal: the owner's deadline passed long ago. The
      // entry may still live in a shared session; end it for everyone now.
      await this.entries.drop(e, options);
      return { status: 'lost' };
    }
    let ok: boolean;
    try {
      ok = await this.pool.confirm(e.session, startedAt, options.timeoutMs, 'strict');
    } catch (err) {
      throw storeError(err);
    }
    if (!ok || e.gone) return { status: 'lost' };
    e.ttlMs = lease.ttlMs;
    e.expiresLocal = Math.max(e.expiresLocal, startedAt + lease.ttlMs);
    return { status: 'renewed', expiresAtWallMs: Date.now() + lease.ttlMs };
  }

  async release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    this.assertOpen();
    const e = this.entries.find(lease);
    if (e !== undefined) {
      const wasHeld = !e.ending && !e.gone;
      e.ending = true;
      // If this delete fails, the entry stays tracked and the next keepalive round retries.
      // A delete the sweep already sent for it is this release's delete too.
      const deleted = await this.entries.deleteOnce(e, options);
      this.entries.forget(e);
      return deleted && wasHeld ? { status: 'released' } : { status: 'not_owner' };
    }
    // Not ours in memory (another instance, or a lease from before a restart): find the
    // entry by token and lease id, and delete it only if both still match.
    const dir = this.layout.dir(lease.key);
    const sentAt = this.epoch.sent;
    const res = await this.run(() =>
      this.client.kv.txn(
        readTxn({ request_range: contendersRange(dir, prefixEnd(dir)) }, epochRangeOp(this.layout)),
        callOptions(options),
      ),
    );
    const { base } = this.epoch.see(res.header, res.responses[1]?.response_range?.kvs, sentAt);
    for (const kv of (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[]) {
      if (base + BigInt(kv.create_revision) !== lease.token) continue;
      if (this.layout.parseEntry(kv.key)?.key !== lease.key) continue;
      const d = decodeEntry(kv.value.toString('utf8'));
      if ('foreign' in d || d.leaseId !== lease.leaseId) continue;
      const deleted = await this.entries.deleteByRevision(
        kv.key,
        BigInt(kv.create_revision),
        options,
      );
      return deleted ? { status: 'released' } : { status: 'not_owner' };
    }
    return { status: 'not_owner' };
  }

  async inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    this.assertOpen();
    const dir = this.layout.dir(key);
    const sentAt = this.epoch.sent;
    const res = await this.run(() =>
      this.client.kv.txn(
        readTxn(
          { request_range: contendersRange(dir, prefixEnd(dir)) },
          { request_range: { key: this.layout.last(key) } },
          epochRangeOp(this.layout),
        ),
        callOptions(options),
      ),
    );
    const view = this.epoch.see(res.header, res.responses[2]?.response_range?.kvs, sentAt);
    const kvs = (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[];
    const lastKv = (res.responses[1]?.response_range?.kvs ?? [])[0] as unknown as Kv | undefined;
    const holderKv = firstDirect(this.layout, kvs, key);
    const holder = holderKv === undefined ? undefined : await this.holderInfo(holderKv, options);
    // A marker from before the epoch names no token of this epoch.
    const lastRev = lastKv === undefined ? 0n : lastTokenOf(lastKv);
    let lastToken = lastRev > view.rev ? view.base + lastRev : 0n;
    if (holder !== undefined && holder.token > lastToken) lastToken = holder.token;
    return { key, lastToken, holder };
  }

  async list(prefix: string, limit: number, options: StoreRequestOptions): Promise<LeaseState[]> {
    this.assertOpen();
    const start = Buffer.from(this.layout.namespace + prefix, 'utf8');
    const sentAt = this.epoch.sent;
    const res = await this.run(() =>
      this.client.kv.txn(
        readTxn(
          {
            request_range: {
              key: start.length === 0 ? Buffer.from([0]) : start,
              range_end: prefixEnd(start),
            },
          },
          epochRangeOp(this.layout),
        ),
        callOptions(options),
      ),
    );
    this.epoch.see(res.header, res.responses[1]?.response_range?.kvs, sentAt);
    // Group contenders by key; the lowest create revision of each group holds it.
    const firstByKey = new Map<string, Kv>();
    for (const kv of (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[]) {
      const p = this.layout.parseEntry(kv.key);
      if (p === undefined || !p.key.startsWith(prefix)) continue;
      const cur = firstByKey.get(p.key);
      if (cur === undefined || BigInt(kv.create_revision) < BigInt(cur.create_revision))
        firstByKey.set(p.key, kv);
    }
    const keys = [...firstByKey.keys()].sort((a, b) =>
      Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')),
    );
    const out: LeaseState[] = [];
    for (const key of keys.slice(0, limit)) {
      const kv = firstByKey.get(key)!;
      const holder = await this.holderInfo(kv, options);
      out.push({ key, lastToken: holder.token, holder });
    }
    return out;
  }

  async watch(key: string, onChange: () => void): Promise<Unwatch> {
    this.assertOpen();
    return watchContenders(this.client, this.layout, key, onChange, (fn) => this.run(fn));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort(closedError());
    const w = this.deleteWatch;
    this.deleteWatch = undefined;
    if (w !== undefined) await w.then((x) => x.cancel()).catch(() => undefined);
    this.entries.byKey.clear();
    await this.pool.close(2000);
    if (this.ownsClient) this.client.close();
  }

  // ---------------------------------------------------------------------------------------

  private valueOf(request: StoreAcquireRequest): string {
    return encodeEntry({
      ownerId: request.ownerId,
      leaseId: request.leaseId,
      value: request.value,
      ttlMs: request.ttlMs,
      headroomMs: this.headroomMs,
    });
  }

  private async holderInfo(kv: Kv, options: StoreRequestOptions): Promise<HolderInfo> {
    const hex = this.layout.parseEntry(kv.key)?.hex ?? '';
    let remainingMs = 1;
    if (kv.lease !== '0') {
      const ttl = await this.run(() =>
        this.client.leaseClient.leaseTimeToLive(
          { ID: kv.lease, keys: false },
          callOptions(options),
        ),
      );
      remainingMs = Number(ttl.TTL) * 1000;
    }
    const token = this.epoch.latest.base + BigInt(kv.create_revision);
    return holderFromEntry(kv.value.toString('utf8'), hex, remainingMs, token);
  }

  /**
   * The namespace's deletion watch (notify.ts), created before the first grant: a renewal
   * then notices an entry deleted behind its back. A deletion after the entry's grant ends it.
   */
  private ensureDeleteWatch(timeoutMs: number): Promise<EtcdWatcher> {
    this.deleteWatch ??= watchNamespaceDeletes(
      this.client,
      this.layout,
      timeoutMs,
      (etcdKey, modRevision) => {
        const e = this.entries.byKey.get(etcdKey);
        if (e !== undefined && e.token !== 0n && modRevision > e.token) this.entries.lose(e);
      },
    ).catch((err: unknown) => {
      this.deleteWatch = undefined;
      throw err;
    });
    return this.deleteWatch;
  }

  private async run<T>(fn: () => Promise<T>): Promise<T> {
    this.assertOpen();
    try {
      return await fn();
    } catch (err) {
      throw storeError(err);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw closedError();
  }
}

function lastTokenOf(kv: Kv): bigint {
  const v = kv.value.toString('utf8');
  return v === '' ? BigInt(kv.mod_revision) : BigInt(v);
}
