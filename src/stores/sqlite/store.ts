import { realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type {
  BatchRenewingLeaseStore,
  HandOffLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
} from '../../core/store.js';
import type { LeaseState, StoreCapabilities } from '../../core/types.js';
import {
  createLeaseBatch,
  type GroupCommit,
  type Granted,
  type Write,
  type WriteResult,
} from './batch.js';
import { openWalForSync, WalSync } from './batch-wal-sync.js';
import {
  durabilitySettings,
  openSqliteDatabase,
  type DurabilitySettings,
  type SqliteDatabase,
} from './client.js';
import { RestoreGuard } from './epoch.js';
import { closedError, contentionError, exhaustedError, openError, storeError } from './errors.js';
import {
  grantParams,
  busyAnswer,
  handOffResult,
  hasRoom,
  holderOf,
  isLive,
  lockDelayLeftMs,
  tokenBlockOf,
  topOf,
  type LeaseRow,
} from './lease-row.js';
import { machineBootId, machineMonotonicUs } from './machine-time.js';
import { openLeaseTable } from './migrate.js';
import {
  foreignCommitsOf,
  releaseChangeFeed,
  retainChangeFeed,
  type ChangeFeed,
  type ForeignCommits,
} from './notify.js';
import { resolveSqliteStoreOptions, type SqliteLeaseStoreOptions } from './options.js';
import { prepareLeaseTransactions, type LeaseTransactions } from './transactions.js';

const CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'machine_monotonic',
  tokenDurability: 'durable',
  watch: 'push',
  sharedAcrossProcesses: true,
  minTtlMs: 1,
  ttlGranularityMs: 1,
  tokenBlocks: true,
  lockDelay: true,
});

/** A renewal's `lost` answer: one frozen object for all of them. */
const LOST: StoreRenewResult = Object.freeze({ status: 'lost' });

/** Reads and conditional writes per grant before a contended key answers unavailable. */
const MAX_GRANT_ATTEMPTS = 3;

/**
 * The embedded lease store: one SQLite file shared by every process on one machine.
 *
 * - Exclusion across processes: each grant is one atomic upsert under SQLite's write lock
 *   (WAL mode, busy timeout).
 * - Time: this machine's monotonic clock (shared by all processes, immune to wall-clock
 *   steps), tagged with the boot id so that leases from before a reboot count as expired.
 * - Durability: `synchronous = FULL` for grants, so the commit that grants a token is on disk
 *   before the token is returned; a crash or power loss cannot hand the same token out twice.
 *   Renewals and releases skip the fsync (transactions.ts says why). With
 *   group commit the connection stays NORMAL and a grant waits for an fdatasync of the WAL
 *   instead (WalSync), which is the same guarantee.
 * - A busy answer is a read: no write lock, no WAL frame.
 * - Token blocks (decision 007): a grant can reserve the tokens after its own (column
 *   `token_block`, migration 0002); the next grant comes after the whole block.
 * - Fencing epoch (decision 011, migration 0003): keys start above the epoch's floor, and a
 *   grant is refused while the file counts fewer grants than its sidecar `<db>-epoch` — a
 *   file restored from an older copy — until `leasehold epoch` raises the floor (epoch.ts).
 * - Not for network file systems (their locking and notifications are unreliable), and not
 *   for `:memory:`, which gives every connection a private database.
 *
 * @example
 * const store = new SqliteLeaseStore({ path: './leasehold.db' });
 * const client = new LeaseClient({ store });
 */
export class SqliteLeaseStore implements HandOffLeaseStore, BatchRenewingLeaseStore {
  readonly kind = 'sqlite';
  readonly capabilities = CAPABILITIES;
  readonly path: string;
  /** The durability settings, read back from the connection. */
  get settings(): DurabilitySettings {
    return durabilitySettings(this.db);
  }
  private readonly db: SqliteDatabase;
  private readonly bootId: string;
  private readonly feed: ChangeFeed;
  /** Whether another connection committed to the file since the last call (for the feed). */
  private readonly foreignCommits: ForeignCommits;
  /** The prepared statements and the write transactions (transactions.ts). */
  private readonly tx: LeaseTransactions;
  /** Writes waiting for their shared commit, when `groupCommit` is on. */
  private readonly writes: GroupCommit<Write, WriteResult> | undefined;
  /** The grants' durability barrier, when `groupCommit` is on. */
  private readonly wal: WalSync | undefined;
  /** Refuses grants on a file restored from an older copy (see epoch.ts). */
  private readonly guard: RestoreGuard;
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(options: SqliteLeaseStoreOptions) {
    const { path, table, busyTimeoutMs, groupCommit } = resolveSqliteStoreOptions(options);
    const absolute = resolve(path);
    try {
      this.db = openSqliteDatabase(absolute, { timeout: busyTimeoutMs });
      openLeaseTable(this.db, table, busyTimeoutMs);
    } catch (err) {
      throw openError(absolute, err);
    }
    this.path = join(realpathSync(dirname(absolute)), basename(absolute));
    this.bootId = machineBootId();
    this.guard = new RestoreGuard(this.db, table, this.path);
    this.tx = prepareLeaseTransactions(this.db, table, this.guard, this.bootId, groupCommit);
    if (groupCommit) {
      // Commits skip SQLite's own fsync (NORMAL); a grant waits for `wal.durable()` instead,
      // an fdatasync of the WAL on the thread pool shared by every commit made meanwhile (see
      // WalSync for why that is as durable as FULL for what was committed).
      this.db.pragma('synchronous = NORMAL');
      this.wal = new WalSync(openWalForSync(absolute));
      this.writes = createLeaseBatch({
        tx: this.tx,
        guard: this.guard,
        bootId: this.bootId,
        wal: this.wal,
        changed: (keys, granted) => this.feed.announceAll(keys, granted),
      });
    }
    this.foreignCommits = foreignCommitsOf(this.db);
    this.feed = retainChangeFeed(this.path, this.foreignCommits);
  }

  /** Whether grants are committed in groups (see {@link SqliteLeaseStoreOptions.groupCommit}). */
  get groupCommit(): boolean {
    return this.writes !== undefined;
  }

  tryAcquire(
    request: StoreAcquireRequest,
    _options?: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    if (this.writes !== undefined) return this.acquireGrouped(request, 0);
    return this.run(() => {
      tokenBlockOf(request);
      for (let attempt = 0; attempt < MAX_GRANT_ATTEMPTS; attempt++) {
        const nowUs = machineMonotonicUs();
        const read = this.readForGrant(request, nowUs);
        if (read !== undefined) return read;
        const expiresWallMs = Date.now() + request.ttlMs;
        const granted = this.tx.acquire(grantParams(request, nowUs, expiresWallMs, this.bootId));
        if (granted !== undefined) {
          this.feed.announce(request.key, 'granted');
          return { status: 'acquired', token: granted.token, expiresAtWallMs: expiresWallMs };
        }
        // Another process won the key between our read and our write: read again.
      }
      throw contentionError(request.key);
    });
  }

  /**
   * The grant with group commit: the read happens now (a busy answer goes out at once and
   * writes nothing); a free key joins the next shared commit, and the answer waits until the
   * WAL is on disk. A grant that lost its key to another process, or to an earlier grant in the
   * same batch, reads again.
   */
  private async acquireGrouped(
    request: StoreAcquireRequest,
    attempt: number,
  ): Promise<StoreAcquireResult> {
    // Checked before the grant joins a batch, where a throw would fail the whole batch.
    tokenBlockOf(request);
    const read = await this.run(() => this.readForGrant(request, machineMonotonicUs()));
    if (read?.status === 'acquired') {
      // The caller's own lease (a retry): the read may have seen a grant that is committed but
      // not yet on disk, which must not be answered before it is.
      await this.durable();
      return read;
    }
    if (read !== undefined) return read;
    if (attempt >= MAX_GRANT_ATTEMPTS) throw contentionError(request.key);
    const granted = (await this.submit({ kind: 'grant', request })) as Granted | undefined;
    if (granted === undefined) return this.acquireGrouped(request, attempt + 1);
    try {
      await granted.durable;
    } catch (err) {
      throw storeError(err);
    }
    return { status: 'acquired', token: granted.token, expiresAtWallMs: granted.expiresWallMs };
  }

  /** Queues a write for the next shared commit; resolves once it has committed (not synced). */
  private async submit(write: Write): Promise<WriteResult> {
    if (this.closed) throw closedError();
    try {
      return await this.writes!.submit(write);
    } catch (err) {
      throw storeError(err);
    }
  }

  /** Resolves once everything committed so far is on disk (group commit only). */
  private async durable(): Promise<void> {
    try {
      await this.wal?.durable();
    } catch (err) {
      throw storeError(err);
    }
  }

  /** The read before a grant: busy, the caller's own live lease (a retry), or undefined = free. */
  private readForGrant(
    request: StoreAcquireRequest,
    nowUs: bigint,
  ): StoreAcquireResult | undefined {
    const row = this.tx.stmt.select.get({ key: request.key });
    if (row === undefined) return undefined;
    if (!this.isLive(row, nowUs)) {
      if (!hasRoom(row, request)) throw exhaustedError(request.key);
      if (lockDelayLeftMs(row, nowUs, this.bootId, request) > 0) {
        return busyAnswer(row, nowUs, this.bootId, request);
      }
      return undefined;
    }
    if (row.lease_id === request.leaseId) return { status: 'acquired', token: row.token };
    return busyAnswer(row, nowUs, this.bootId, request);
  }

  async renew(
    lease: StoreLeaseRef & { ttlMs: number },
    _options?: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    if (this.writes !== undefined) {
      const { key, leaseId, token, ttlMs } = lease;
      const expiresWallMs = await this.submit({ kind: 'renew', key, leaseId, token, ttlMs });
      return typeof expiresWallMs === 'number'
        ? { status: 'renewed', expiresAtWallMs: expiresWallMs }
        : { status: 'lost' };
    }
    const [result] = await this.renewMany([lease]);
    return result!;
  }

  /**
   * Renews leases in one fsync-free transaction of their own, with or without group commit: a
   * renewal needs no sync, so it has nothing to share with a group, and a server's batch stays
   * one transaction (`leasehold serve` with 10,000 leases: server CPU 8.93% → 5.63% of a core).
   * It runs before the writes queued for the next group, an order its callers could have seen.
   */
  async renewMany(
    leases: readonly StoreRenewRequest[],
    _options?: StoreRequestOptions,
  ): Promise<readonly StoreRenewResult[]> {
    if (leases.length === 0) return [];
    return this.run(() => {
      const nowUs = machineMonotonicUs();
      const wallMs = Date.now();
      const changes = this.tx.renewMany({ leases, bootId: this.bootId, nowUs, wallMs });
      const results = new Array<StoreRenewResult>(leases.length);
      for (let i = 0; i < leases.length; i++) {
        results[i] =
          changes[i] === 1
            ? { status: 'renewed', expiresAtWallMs: wallMs + leases[i]!.ttlMs }
            : LOST;
      }
      return results;
    });
  }

  async release(lease: StoreLeaseRef, _options?: StoreRequestOptions): Promise<StoreReleaseResult> {
    if (this.writes !== undefined) {
      const { key, leaseId, token } = lease;
      const released = await this.submit({ kind: 'release', key, leaseId, token });
      return released === true ? { status: 'released' } : { status: 'not_owner' };
    }
    return this.run(() => {
      const changes = this.tx.release({
        key: lease.key,
        leaseId: lease.leaseId,
        token: lease.token,
      });
      if (changes !== 1) return { status: 'not_owner' };
      this.feed.announce(lease.key);
      return { status: 'released' };
    });
  }

  /**
   * {@link HandOffLeaseStore}: the release and the acquire attempt in one IMMEDIATE
   * transaction, committed with the grants' FULL sync.
   */
  async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    _options?: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    tokenBlockOf(acquire);
    const handed = await this.run(() => {
      const nowUs = machineMonotonicUs();
      const expiresWallMs = Date.now() + acquire.ttlMs;
      const r = this.tx.handOff({
        key: acquire.key,
        nowUs,
        release: { key: release.key, leaseId: release.leaseId, token: release.token },
        acquire: grantParams(acquire, nowUs, expiresWallMs, this.bootId),
      });
      // Granted: the key is held again, and this process's waiters are told so (they need
      // not look); a release that granted nothing freed it.
      if (r.granted !== undefined) this.feed.announce(acquire.key, 'granted');
      else if (r.released) this.feed.announce(acquire.key);
      return { ...r, expiresWallMs, nowUs };
    });
    if (handed.granted !== undefined) await this.durable();
    return handOffResult(handed, handed.expiresWallMs, handed.nowUs, this.bootId, acquire);
  }

  inspect(key: string, _options?: StoreRequestOptions): Promise<LeaseState> {
    return this.run(() => {
      const row = this.tx.stmt.select.get({ key });
      if (row === undefined) return { key, lastToken: 0n, holder: undefined };
      const nowUs = machineMonotonicUs();
      return {
        key,
        lastToken: topOf(row),
        holder: this.isLive(row, nowUs) ? holderOf(row, nowUs) : undefined,
      };
    });
  }

  list(prefix: string, limit: number, _options?: StoreRequestOptions): Promise<LeaseState[]> {
    return this.run(() => {
      const nowUs = machineMonotonicUs();
      return this.tx.stmt.list
        .all({ prefix, bootId: this.bootId, nowUs, limit: BigInt(limit) })
        .map((row) => ({ key: row.key, lastToken: topOf(row), holder: holderOf(row, nowUs) }));
    });
  }

  watch(key: string, onChange: (change?: WatchChange) => void): Promise<Unwatch> {
    if (this.closed) return Promise.reject(closedError());
    return Promise.resolve(this.feed.subscribe(key, onChange));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      // Writes already queued are committed and answered, not dropped.
      while (this.writes !== undefined && this.writes.pending > 0) this.writes.flush();
      this.closed = true;
      if (this.wal !== undefined) {
        await this.wal.idle();
        this.wal.close();
      }
      releaseChangeFeed(this.path, this.feed, this.foreignCommits);
      this.guard.close();
      this.db.close();
    })();
    return this.closing;
  }

  private isLive(row: LeaseRow, nowUs: bigint): boolean {
    return isLive(row, nowUs, this.bootId);
  }

  private run<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(closedError());
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(storeError(err));
    }
  }
}
