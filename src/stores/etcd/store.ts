import { setMaxListeners } from 'node:events';
import { Etcd3, type IOptions, type ITxnResponse, type Watcher } from 'etcd3';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
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
import { EpochGate, epochRangeOp, type EpochView } from './epoch.js';
import { decodeEntry, encodeEntry, holderFromEntry, KeyLayout, prefixEnd } from './keys.js';
import {
  callOptions,
  contendersRange,
  isLeaseNotFound,
  toUnavailable,
  type Kv,
} from './queries.js';
import { EtcdQueue } from './queue.js';
import { closedError, SessionPool, withTimeout, type HeldEntry, type Session } from './session.js';

/** Options for {@link EtcdLeaseStore}. */
export interface EtcdLeaseStoreOptions {
  /**
   * etcd client URLs (`http://10.0.0.1:2379`), or an existing `Etcd3` client in `client`.
   * Defaults to `http://127.0.0.1:2379`.
   */
  readonly hosts?: string | readonly string[];
  /** A client to use instead of `hosts`. The store does not close it. */
  readonly client?: Etcd3;
  /**
   * More `etcd3` client options when the store makes its own client: TLS as
   * `credentials: { rootCertificate, certChain?, privateKey? }` (PEM buffers; use `https://`
   * hosts) and an etcd user as `auth: { username, password }`. The user's role needs
   * readwrite on the `namespace` prefix only. Defaults to none.
   */
  readonly clientOptions?: Omit<IOptions, 'hosts'>;
  /**
   * Prepended to every etcd key. With the default `''`, leasehold key `jobs/nightly` is
   * exactly what `etcdctl lock jobs/nightly` locks; with `'locks/'`, it is
   * `etcdctl lock locks/jobs/nightly`. Defaults to `''`.
   */
  readonly namespace?: string;
  /**
   * The shortest TTL this store accepts. etcd TTLs are whole seconds, and the server raises a
   * TTL below 1.5 × its election timeout (2 s with default settings) to that minimum; the
   * client refuses shorter TTLs rather than being surprised by longer ones. Set 1000 for a
   * server with `--election-timeout` ≤ 666 ms. Defaults to 2000.
   */
  readonly minTtlMs?: number;
  /**
   * Extra etcd TTL of each shared session over its leases' TTL, in whole seconds. A
   * keepalive sent within (headroom − 200 ms) before an acquire covers it, so an acquire on a
   * recently kept-alive session is one round trip. A crashed holder's entries disappear up to
   * this much later than their TTL (TTLs are lower bounds). Defaults to 1.
   */
  readonly sessionHeadroomS?: number;
  /**
   * Renewals wait for a keepalive of their session sent after they began; all renewals
   * waiting share one. Rounds of one session are at least this far apart, which bounds
   * renewal traffic at 1000 / renewBatchMs keepalives per second per session whatever the
   * number of leases, and adds at most this much to a renewal's latency. Defaults to 100.
   */
  readonly renewBatchMs?: number;
}

const DEFAULT_HOSTS = ['http://127.0.0.1:2379'];
const HEADROOM_SAFETY_MS = 200;

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
  readonly client: Etcd3;
  private readonly ownsClient: boolean;
  private readonly layout: KeyLayout;
  private readonly pool: SessionPool;
  private readonly headroomMs: number;
  /** Entries this instance holds, by etcd key. */
  private readonly held = new Map<string, HeldEntry>();
  private readonly queue: EtcdQueue;
  /**
   * The fencing epoch and the restore check (epoch.ts). A restore ends every lease this
   * instance holds or waits for: what etcd says about them now predates what we knew.
   */
  private readonly epoch = new EpochGate(() => {
    for (const e of [...this.held.values()]) {
      e.gone = true;
      this.forget(e);
      e.onGone?.();
    }
  });
  private readonly closing = new AbortController();
  private deleteWatch: Promise<Watcher> | undefined;
  private closed = false;

  constructor(options: EtcdLeaseStoreOptions = {}) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    const namespace = options.namespace ?? '';
    if (typeof namespace !== 'string' || /[\u0000-\u001f]/.test(namespace)) {
      throw invalidArgument('namespace', 'must be a string without control characters', namespace);
    }
    const minTtlMs = options.minTtlMs ?? 2000;
    if (!Number.isInteger(minTtlMs) || minTtlMs < 1000 || minTtlMs % 1000 !== 0) {
      throw invalidArgument(
        'minTtlMs',
        'must be a whole number of seconds, at least 1000',
        minTtlMs,
      );
    }
    const headroomS = options.sessionHeadroomS ?? 1;
    if (!Number.isInteger(headroomS) || headroomS < 1 || headroomS > 60) {
      throw invalidArgument('sessionHeadroomS', 'must be an integer from 1 to 60', headroomS);
    }
    this.headroomMs = headroomS * 1000;
    const renewBatchMs = options.renewBatchMs ?? 100;
    if (!Number.isInteger(renewBatchMs) || renewBatchMs < 0 || renewBatchMs > 1000) {
      throw invalidArgument('renewBatchMs', 'must be an integer from 0 to 1000', renewBatchMs);
    }
    this.capabilities = Object.freeze({
      timeAuthority: 'store',
      tokenDurability: 'replicated',
      watch: 'push',
      sharedAcrossProcesses: true,
      minTtlMs,
      ttlGranularityMs: 1000,
      // A session lease outlives its entries by the headroom, and the leader checks for
      // expired leases every 500 ms.
      expiryLagMs: this.headroomMs + 500,
      // etcd answers TTLs, not instants: expiresAtWallMs below is this client's clock.
      expiryObservedBy: 'client',
    });
    if (options.client !== undefined) {
      this.client = options.client;
      this.ownsClient = false;
    } else {
      const hosts = options.hosts ?? DEFAULT_HOSTS;
      this.client = new Etcd3({
        ...options.clientOptions,
        hosts: typeof hosts === 'string' ? hosts : [...hosts],
      });
      this.ownsClient = true;
    }
    this.layout = new KeyLayout(namespace);
    this.pool = new SessionPool({
      client: this.client,
      now: () => performance.now(),
      headroomS,
      reuseWindowMs: this.headroomMs - HEADROOM_SAFETY_MS,
      roundGapMs: renewBatchMs,
      onRound: (s) => this.sweep(s),
      onDead: (s) => {
        const entries = [...s.entries.values()];
        s.entries.clear();
        for (const e of entries) {
          e.gone = true;
          this.held.delete(e.etcdKey);
          e.onGone?.();
        }
      },
    });
    // Every queued waiter listens for close; many at once is normal, not a leak.
    setMaxListeners(0, this.closing.signal);
    this.queue = new EtcdQueue({
      client: this.client,
      layout: this.layout,
      pool: this.pool,
      held: this.held,
      closing: this.closing.signal,
      entryValue: (r) => this.valueOf(r),
      forget: (e) => this.forget(e),
      holderInfo: (kv, o) => this.holderInfo(kv, o),
      epoch: this.epoch,
      run: (fn) => this.run(fn),
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
    const ttlS = Math.ceil(request.ttlMs / 1000);
    await this.ensureDeleteWatch(options.timeoutMs);
    for (let attempt = 0; attempt < 3; attempt++) {
      const session = await this.pool.fresh(ttlS, startedAt, options.timeoutMs);
      try {
        return await this.tryWith(session, request, options, startedAt);
      } catch (err) {
        // The session's etcd lease vanished between our keepalive and the put (it expired
        // during a pause, or was revoked): the put failed atomically. Start a new session.
        if (isLeaseNotFound(err)) {
          this.pool.kill(session);
          continue;
        }
        // Unknown outcome: the put may have committed. Track a ghost that the next keepalive
        // round deletes (matched by its value, which holds our lease id), so the shared
        // session cannot keep an entry nobody knows about alive (Jepsen's etcd ghost locks).
        this.rememberGhost(session, request, startedAt);
        throw toUnavailable(err);
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
    const dir = this.layout.dir(request.key);
    const dirEnd = prefixEnd(dir);
    const entryKey = this.layout.entry(request.key, session.hex);
    const value = this.valueOf(request);
    // Fast path, one round trip: if nobody contends for the key (no entry under KEY/), put
    // ours and the last-grant marker; otherwise read the contenders in create order. A
    // busy answer writes nothing.
    const res = await this.client.kv.txn(
      {
        compare: [
          { key: dir, range_end: dirEnd, target: 'Create', result: 'Equal', create_revision: 0 },
        ],
        success: [
          { request_put: { key: entryKey, value: Buffer.from(value), lease: session.id } },
          { request_put: { key: this.layout.last(request.key), value: Buffer.alloc(0) } },
          epochRangeOp(this.layout),
        ],
        failure: [{ request_range: contendersRange(dir, dirEnd) }, epochRangeOp(this.layout)],
      },
      callOptions(options),
    );
    const view = await this.admit(res, res.succeeded ? 2 : 1, entryKey, options);
    if (res.succeeded) {
      const revision = BigInt(res.header.revision);
      this.remember(session, entryKey, request, revision, startedAt, view.base);
      return {
        status: 'acquired',
        token: view.base + revision,
        expiresAtWallMs: Date.now() + request.ttlMs,
      };
    }
    const kvs = (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[];
    const holder = this.firstDirect(kvs, request.key);
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
    const dir = this.layout.dir(request.key);
    const dirEnd = prefixEnd(dir);
    const res = await this.client.kv.txn(
      {
        compare: [{ key: entryKey, target: 'Create', result: 'Equal', create_revision: 0 }],
        success: [
          { request_put: { key: entryKey, value: Buffer.from(value), lease: session.id } },
          { request_range: contendersRange(dir, dirEnd) },
          epochRangeOp(this.layout),
        ],
        failure: [{ request_range: contendersRange(dir, dirEnd) }, epochRangeOp(this.layout)],
      },
      callOptions(options),
    );
    const rangeAt = res.succeeded ? 1 : 0;
    const view = await this.admit(res, rangeAt + 1, entryKey, options);
    const kvs = (res.responses[rangeAt]?.response_range?.kvs ?? []) as unknown as Kv[];
    const holder = this.firstDirect(kvs, request.key);
    const mine = BigInt(res.header.revision);
    if (res.succeeded && holder !== undefined && holder.key.equals(entryKey)) {
      await this.client.kv.txn(
        {
          compare: [],
          success: [
            {
              request_put: {
                key: this.layout.last(request.key),
                value: Buffer.from(mine.toString()),
              },
            },
          ],
          failure: [],
        },
        callOptions(options),
      );
      this.remember(session, entryKey, request, mine, startedAt, view.base);
      return {
        status: 'acquired',
        token: view.base + mine,
        expiresAtWallMs: Date.now() + request.ttlMs,
      };
    }
    if (res.succeeded) {
      await this.deleteByRevision(entryKey, mine, options);
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
  ): Promise<EpochView> {
    try {
      return this.epoch.admit(res.header, res.responses[at]?.response_range?.kvs);
    } catch (err) {
      if (res.succeeded) {
        await this.deleteByRevision(entryKey, BigInt(res.header.revision), options).catch(
          () => undefined,
        );
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
        this.remember(session, entryKey, request, revision, startedAt, view.base);
      }
      return { status: 'acquired', token: view.base + revision };
    }
    const info = await this.holderInfo(holder, options);
    return { status: 'busy', holder: info, retryAfterMs: info.remainingMs };
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.assertOpen();
    const startedAt = performance.now();
    const e = this.findHeld(lease);
    if (e === undefined || e.ending) return { status: 'lost' };
    if (startedAt > e.expiresLocal) {
      // Its TTL has passed since the last renewal: the owner's deadline passed long ago. The
      // entry may still live in a shared session; end it for everyone now.
      await this.drop(e, options);
      return { status: 'lost' };
    }
    let ok: boolean;
    try {
      ok = await this.pool.confirm(e.session, startedAt, options.timeoutMs, 'strict');
    } catch (err) {
      throw toUnavailable(err);
    }
    if (!ok || e.gone) return { status: 'lost' };
    e.ttlMs = lease.ttlMs;
    e.expiresLocal = Math.max(e.expiresLocal, startedAt + lease.ttlMs);
    return { status: 'renewed', expiresAtWallMs: Date.now() + lease.ttlMs };
  }

  async release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    this.assertOpen();
    const e = this.findHeld(lease);
    if (e !== undefined) {
      const wasHeld = !e.ending && !e.gone;
      e.ending = true;
      // If this delete fails, the entry stays tracked and the next keepalive round retries.
      // A delete the sweep already sent for it is this release's delete too.
      const deleted = await this.deleteOnce(e, options);
      this.forget(e);
      return deleted && wasHeld ? { status: 'released' } : { status: 'not_owner' };
    }
    // Not ours in memory (another instance, or a lease from before a restart): find the
    // entry by token and lease id, and delete it only if both still match.
    const dir = this.layout.dir(lease.key);
    const res = await this.run(() =>
      this.client.kv.txn(
        {
          compare: [],
          success: [
            { request_range: contendersRange(dir, prefixEnd(dir)) },
            epochRangeOp(this.layout),
          ],
          failure: [],
        },
        callOptions(options),
      ),
    );
    const { base } = this.epoch.see(res.header, res.responses[1]?.response_range?.kvs);
    for (const kv of (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[]) {
      if (base + BigInt(kv.create_revision) !== lease.token) continue;
      if (this.layout.parseEntry(kv.key)?.key !== lease.key) continue;
      const d = decodeEntry(kv.value.toString('utf8'));
      if ('foreign' in d || d.leaseId !== lease.leaseId) continue;
      const deleted = await this.deleteByRevision(kv.key, BigInt(kv.create_revision), options);
      return deleted ? { status: 'released' } : { status: 'not_owner' };
    }
    return { status: 'not_owner' };
  }

  async inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    this.assertOpen();
    const dir = this.layout.dir(key);
    const res = await this.run(() =>
      this.client.kv.txn(
        {
          compare: [],
          success: [
            { request_range: contendersRange(dir, prefixEnd(dir)) },
            { request_range: { key: this.layout.last(key) } },
            epochRangeOp(this.layout),
          ],
          failure: [],
        },
        callOptions(options),
      ),
    );
    const view = this.epoch.see(res.header, res.responses[2]?.response_range?.kvs);
    const kvs = (res.responses[0]?.response_range?.kvs ?? []) as unknown as Kv[];
    const lastKv = (res.responses[1]?.response_range?.kvs ?? [])[0] as unknown as Kv | undefined;
    const holderKv = this.firstDirect(kvs, key);
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
    const res = await this.run(() =>
      this.client.kv.txn(
        {
          compare: [],
          success: [
            {
              request_range: {
                key: start.length === 0 ? Buffer.from([0]) : start,
                range_end: prefixEnd(start),
              },
            },
            epochRangeOp(this.layout),
          ],
          failure: [],
        },
        callOptions(options),
      ),
    );
    this.epoch.see(res.header, res.responses[1]?.response_range?.kvs);
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
    const dir = this.layout.dir(key);
    // No start revision: the watcher starts synced at the current revision, so events reach
    // it at once (a watcher started in the past is caught up only every 100 ms). The caller
    // re-checks after this resolves, so nothing before it is missed.
    const watcher = await this.run(() =>
      withTimeout(
        this.client
          .watch()
          .inRange({ start: dir, end: prefixEnd(dir) })
          .create(),
        5000,
        'creating an etcd watch',
      ),
    );
    const fire = (): void => onChange();
    watcher.on('data', fire);
    // After a reconnect events may have been missed: wake the waiter to re-check.
    watcher.on('connected', fire);
    watcher.on('error', fire);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      watcher.removeListener('data', fire);
      watcher.cancel().catch(() => undefined);
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort(closedError());
    const w = this.deleteWatch;
    this.deleteWatch = undefined;
    if (w !== undefined) await w.then((x) => x.cancel()).catch(() => undefined);
    this.held.clear();
    await this.pool.close(2000);
    if (this.ownsClient) this.client.close();
  }

  // ---------------------------------------------------------------------------------------

  private remember(
    session: Session,
    entryKey: Buffer,
    request: StoreAcquireRequest,
    token: bigint,
    startedAt: number,
    base: bigint,
  ): void {
    const etcdKey = entryKey.toString('utf8');
    const prior = this.held.get(etcdKey);
    if (prior !== undefined && prior.token === token) return;
    const e: HeldEntry = {
      etcdKey,
      key: request.key,
      leaseId: request.leaseId,
      token,
      base,
      value: this.valueOf(request),
      session,
      ttlMs: request.ttlMs,
      expiresLocal: startedAt + request.ttlMs,
      gone: false,
      ending: false,
      waiting: false,
      markOnRelease: false,
    };
    this.held.set(etcdKey, e);
    session.entries.set(etcdKey, e);
  }

  /** Tracks an entry an acquire may or may not have written, for deletion by value. */
  private rememberGhost(session: Session, request: StoreAcquireRequest, startedAt: number): void {
    const etcdKey = this.layout.entry(request.key, session.hex).toString('utf8');
    if (this.held.has(etcdKey)) return;
    const e: HeldEntry = {
      etcdKey,
      key: request.key,
      leaseId: request.leaseId,
      token: 0n,
      value: this.valueOf(request),
      session,
      ttlMs: request.ttlMs,
      expiresLocal: startedAt,
      gone: false,
      ending: true,
      waiting: false,
      markOnRelease: false,
    };
    this.held.set(etcdKey, e);
    session.entries.set(etcdKey, e);
  }

  private valueOf(request: StoreAcquireRequest): string {
    return encodeEntry({
      ownerId: request.ownerId,
      leaseId: request.leaseId,
      value: request.value,
      ttlMs: request.ttlMs,
      headroomMs: this.headroomMs,
    });
  }

  private findHeld(lease: StoreLeaseRef): HeldEntry | undefined {
    for (const s of this.pool.sessions()) {
      const e = this.held.get(this.layout.entry(lease.key, s.hex).toString('utf8'));
      if (e === undefined || e.leaseId !== lease.leaseId) continue;
      if ((e.base ?? 0n) + e.token === lease.token) return e;
    }
    return undefined;
  }

  private forget(e: HeldEntry): void {
    if (this.held.get(e.etcdKey) === e) this.held.delete(e.etcdKey);
    if (e.session.entries.get(e.etcdKey) === e) e.session.entries.delete(e.etcdKey);
  }

  /** Ends an entry for good: deleted now if possible, else by a later keepalive round. */
  private async drop(e: HeldEntry, options: StoreRequestOptions): Promise<void> {
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
  private sweep(s: Session): void {
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
  private deleteOnce(e: HeldEntry, options: StoreRequestOptions): Promise<boolean> {
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
      const mark = e.markOnRelease ? this.layout.last(e.key) : undefined;
      return this.deleteByRevision(Buffer.from(e.etcdKey), e.token, options, mark);
    }
    const key = Buffer.from(e.etcdKey);
    const res = await this.run(() =>
      this.client.kv.txn(
        {
          compare: [{ key, target: 'Value', result: 'Equal', value: Buffer.from(e.value) }],
          success: [{ request_delete_range: { key } }],
          failure: [],
        },
        callOptions(options),
      ),
    );
    return res.succeeded;
  }

  /**
   * Deletes `key` only while its create revision is still `token`; with `markLast`, records
   * `token` as the key's last grant in the same transaction.
   */
  private async deleteByRevision(
    key: Buffer,
    token: bigint,
    options: StoreRequestOptions,
    markLast?: Buffer,
  ): Promise<boolean> {
    const res = await this.run(() =>
      this.client.kv.txn(
        {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: token.toString() }],
          success:
            markLast === undefined
              ? [{ request_delete_range: { key } }]
              : [
                  { request_delete_range: { key } },
                  { request_put: { key: markLast, value: Buffer.from(token.toString()) } },
                ],
          failure: [],
        },
        callOptions(options),
      ),
    );
    return res.succeeded;
  }

  /** The lowest-create-revision entry that belongs to exactly `key` (not `key/x`). */
  private firstDirect(kvs: readonly Kv[], key: string): Kv | undefined {
    for (const kv of kvs) if (this.layout.parseEntry(kv.key)?.key === key) return kv;
    return undefined;
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
   * Watches deletions in the namespace, so that a renewal notices an entry deleted behind
   * its back (`etcdctl del`, a revoke by an operator) without reading every held key: the
   * check costs nothing per renewal. Created before the first grant, so no deletion of an
   * entry this instance holds can precede it.
   */
  private ensureDeleteWatch(timeoutMs: number): Promise<Watcher> {
    this.deleteWatch ??= (async () => {
      const start = Buffer.from(this.layout.namespace, 'utf8');
      const watcher = this.client
        .watch()
        .inRange({ start: start.length === 0 ? Buffer.from([0]) : start, end: prefixEnd(start) })
        // etcd3's `ignore(op)` is an alias of `only(op)`: `only('delete')` is what asks
        // etcd to filter out puts (FilterType NOPUT).
        .only('delete')
        .watcher();
      const creating = new Promise<Watcher>((resolve, reject) => {
        watcher.once('connected', () => resolve(watcher));
        watcher.once('error', reject);
      });
      // etcd3 retries a watch whose authentication fails, forever and silently: a wrong
      // password would look like a slow server. One read of the namespace alongside answers
      // with the real cause (authentication failed, permission denied) at once.
      const probe = this.client
        .get(start.length === 0 ? '\u0001' : this.layout.namespace)
        .options(callOptions({ timeoutMs }))
        .exec();
      let w: Watcher;
      try {
        [w] = await withTimeout(
          Promise.all([creating, probe]),
          timeoutMs,
          'creating the etcd deletion watch',
        );
      } catch (err) {
        // Detached, a watch etcd3 could not create stops its reconnect timers (which would
        // otherwise keep the process alive after close()).
        void watcher.cancel().catch(() => undefined);
        throw err;
      }
      w.on('delete', (kv: { key: Buffer; mod_revision: string }) => {
        const e = this.held.get(kv.key.toString('utf8'));
        if (e !== undefined && e.token !== 0n && BigInt(kv.mod_revision) > e.token) {
          e.gone = true;
          this.forget(e);
          e.onGone?.();
        }
      });
      return w;
    })().catch((err: unknown) => {
      this.deleteWatch = undefined;
      throw toUnavailable(err);
    });
    return this.deleteWatch;
  }

  private async run<T>(fn: () => Promise<T>): Promise<T> {
    this.assertOpen();
    try {
      return await fn();
    } catch (err) {
      throw toUnavailable(err);
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
