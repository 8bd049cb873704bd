import Database from 'better-sqlite3';
import { closeSync, fsyncSync, openSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, resolve, basename, join } from 'node:path';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import { leaseIdPrefix } from '../../core/ids.js';
import { LIMITS } from '../../core/validate.js';
import type {
  HandOffLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
} from '../../core/store.js';
import type { HolderInfo, LeaseState, StoreCapabilities } from '../../core/types.js';
import { releaseChangeFeed, retainChangeFeed, type ChangeFeed } from './change-feed.js';
import { epochNames, RestoreGuard } from './epoch.js';
import { GroupCommit } from './group-commit.js';
import { machineBootId, machineMonotonicUs } from './machine-time.js';
import { WalSync } from './wal-sync.js';
import { retryWhileBusy, useDurableWal } from './open-file.js';
import * as Q from './queries.js';

/** Options for {@link SqliteLeaseStore}. */
export interface SqliteLeaseStoreOptions {
  /** The database file. Every process that shares leases opens the same file on a local disk. */
  readonly path: string;
  /** The lease table. Defaults to `leasehold_lease`. */
  readonly table?: string;
  /**
   * How long a write waits for another process's write lock before the request fails as
   * `unavailable`. Blocks this process's event loop while it waits (better-sqlite3 is
   * synchronous). Defaults to 5000 ms.
   */
  readonly busyTimeoutMs?: number;
  /**
   * Commit the grants, releases and renewals asked for in one turn of the event loop together,
   * in one transaction, and let the grants share one fsync of the WAL that runs off the event
   * loop (libuv's thread pool), instead of one fsync each on it. Every grant is still on disk
   * before it is answered, and busy answers still write nothing; a lone request waits one loop
   * turn more. Worth it when many acquisitions run concurrently in this process (the lease
   * server turns it on). Defaults to false.
   */
  readonly groupCommit?: boolean;
}

interface LeaseRow {
  lease_id: string | null;
  owner_id: string | null;
  token: bigint;
  /** Tokens the grant reserved, its own included (decision 007); null means 1. */
  token_block: bigint | null;
  expires_us: bigint;
  boot_id: string;
  value: string | null;
}

const CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'machine_monotonic',
  tokenDurability: 'durable',
  watch: 'push',
  sharedAcrossProcesses: true,
  minTtlMs: 1,
  ttlGranularityMs: 1,
  tokenBlocks: true,
});

const MIGRATIONS = ['0001_lease.sql', '0002_token_block.sql', '0003_epoch.sql'] as const;
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * The embedded lease store: one SQLite file shared by every process on one machine.
 *
 * - Exclusion across processes: each grant is one atomic upsert under SQLite's write lock
 *   (WAL mode, busy timeout).
 * - Time: this machine's monotonic clock (shared by all processes, immune to wall-clock
 *   steps), tagged with the boot id so that leases from before a reboot count as expired.
 * - Durability: `synchronous = FULL` for grants, so the commit that grants a token is on disk
 *   before the token is returned; a crash or power loss cannot hand the same token out twice.
 *   Renewals and releases skip the fsync (see the comment at their statements for why). With
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
export class SqliteLeaseStore implements HandOffLeaseStore {
  readonly kind = 'sqlite';
  readonly capabilities = CAPABILITIES;
  readonly path: string;
  /** The durability settings, read back from the connection. */
  get settings(): {
    readonly journalMode: string;
    readonly synchronous: 'FULL' | 'NORMAL' | 'OFF' | 'EXTRA';
  } {
    const syncLevels = ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const;
    return {
      journalMode: String(this.db.pragma('journal_mode', { simple: true })),
      synchronous: syncLevels[Number(this.db.pragma('synchronous', { simple: true }))] ?? 'OFF',
    };
  }
  private readonly db: Database.Database;
  private readonly bootId: string;
  private readonly feed: ChangeFeed;
  private readonly stmt: {
    select: Database.Statement<{ key: string }, LeaseRow>;
    acquire: Database.Statement<Record<string, unknown>, { token: bigint }>;
    renew: Database.Statement<Record<string, unknown>>;
    release: Database.Statement<Record<string, unknown>>;
    list: Database.Statement<Record<string, unknown>, LeaseRow & { key: string }>;
  };
  private readonly acquireTx: (params: Record<string, unknown>) => { token: bigint } | undefined;
  private readonly renewTx: (params: Record<string, unknown>) => number;
  private readonly releaseTx: (params: Record<string, unknown>) => number;
  private readonly handOffTx: (params: {
    key: string;
    nowUs: bigint;
    release: Record<string, unknown>;
    acquire: Record<string, unknown>;
  }) => {
    released: boolean;
    granted: { token: bigint } | undefined;
    holder: LeaseRow | undefined;
  };
  /** Writes waiting for their shared commit, when `groupCommit` is on. */
  private readonly writes: GroupCommit<Write, WriteResult> | undefined;
  /** The grants' durability barrier, when `groupCommit` is on. */
  private readonly wal: WalSync | undefined;
  /** Refuses grants on a file restored from an older copy (see epoch.ts). */
  private readonly guard: RestoreGuard;
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(options: SqliteLeaseStoreOptions) {
    const path = options?.path as unknown;
    if (typeof path !== 'string' || path.length === 0) {
      throw invalidArgument('path', 'must be a non-empty file path', path);
    }
    if (
      path === ':memory:' ||
      /^file:.*[?&]mode=memory/.test(path) ||
      path.startsWith('file::memory:')
    ) {
      throw invalidArgument(
        'path',
        'must be a file: an in-memory SQLite database is private to one connection, so no other process could see its leases (use MemoryLeaseStore within one process)',
        path,
      );
    }
    const table = options.table ?? 'leasehold_lease';
    if (!TABLE_NAME.test(table))
      throw invalidArgument('table', 'must be a plain SQL identifier', table);
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0 || busyTimeoutMs > 60_000) {
      throw invalidArgument('busyTimeoutMs', 'must be an integer from 0 to 60000', busyTimeoutMs);
    }
    if (options.groupCommit !== undefined && typeof options.groupCommit !== 'boolean') {
      throw invalidArgument('groupCommit', 'must be a boolean', options.groupCommit);
    }
    const absolute = resolve(path);
    try {
      this.db = new Database(absolute, { timeout: busyTimeoutMs });
      openWithRetry(this.db, table, busyTimeoutMs);
    } catch (err) {
      throw new LeaseholdError(
        'ERR_UNAVAILABLE',
        `cannot open SQLite lease store at ${absolute}: ${String(err)}`,
        { cause: err },
      );
    }
    this.path = join(realpathSync(dirname(absolute)), basename(absolute));
    const groupCommit = options.groupCommit === true;
    this.bootId = machineBootId();
    const sql = (text: string): string =>
      text.replaceAll('{{table}}', `"${table}"`).replaceAll('{{epoch}}', `"${table}_epoch"`);
    const guard = new RestoreGuard(this.db, table, this.path);
    this.guard = guard;
    this.stmt = {
      select: this.db.prepare(sql(Q.SELECT_LEASE)),
      acquire: this.db.prepare(sql(Q.ACQUIRE)),
      renew: this.db.prepare(sql(Q.RENEW)),
      release: this.db.prepare(sql(Q.RELEASE)),
      list: this.db.prepare(sql(Q.LIST_LIVE)),
    };
    // Writes run in IMMEDIATE transactions: the write lock is taken (waiting on the busy
    // handler) before anything is read. An autocommit write would start as a reader and fail
    // at once with SQLITE_BUSY when another process commits in between (a stale WAL snapshot
    // cannot be upgraded, and the busy handler is not consulted for that).
    const { acquire, renew, release } = this.stmt;
    const immediate = <A, R>(fn: (a: A) => R): ((a: A) => R) => {
      const tx = this.db.transaction(fn);
      return (a: A) => tx.immediate(a);
    };
    // Only a grant must reach the disk before it is answered: a token lost in a power cut
    // could be handed out again. A lost renewal or release cannot hurt anyone — after a power
    // cut the boot id changes and every lease of the old boot counts as expired — and process
    // crashes keep committed pages in the OS cache either way. So renew and release commit
    // without an fsync (NORMAL; the next FULL commit syncs the WAL up to and including them).
    // With group commit the connection is NORMAL throughout: nothing to switch. (Preparing
    // `PRAGMA synchronous` already sets it, so these statements must not be made then.)
    const relaxed = <A, R>(fn: (a: A) => R): ((a: A) => R) => {
      const run = immediate(fn);
      if (groupCommit) return run;
      const toNormal = this.db.prepare('PRAGMA synchronous = NORMAL');
      const toFull = this.db.prepare('PRAGMA synchronous = FULL');
      return (a: A) => {
        toNormal.run();
        try {
          return run(a);
        } finally {
          toFull.run();
        }
      };
    };
    this.acquireTx = immediate((p: Record<string, unknown>) => {
      guard.check();
      return acquire.get(p);
    });
    // A hand-off grants, so it commits with the grants' FULL sync (with group commit: it waits
    // for the WAL sync before answering).
    this.handOffTx = immediate(
      (p: {
        key: string;
        nowUs: bigint;
        release: Record<string, unknown>;
        acquire: Record<string, unknown>;
      }) => {
        guard.check();
        const released = release.run(p.release).changes === 1;
        const granted = acquire.get(p.acquire);
        const holder = granted === undefined ? this.stmt.select.get({ key: p.key }) : undefined;
        // Under the write lock the grant fails only for a live holder or an exhausted token
        // space; the latter throws, which rolls the release back too (nothing written).
        if (granted === undefined && (holder === undefined || !this.isLive(holder, p.nowUs))) {
          throw exhaustedError(p.key);
        }
        return { released, granted, holder };
      },
    );
    this.renewTx = relaxed((p: Record<string, unknown>) => renew.run(p).changes);
    this.releaseTx = relaxed((p: Record<string, unknown>) => release.run(p).changes);
    if (groupCommit) {
      // Commits skip SQLite's own fsync (NORMAL); a grant waits for `wal.durable()` instead,
      // an fdatasync of the WAL on the thread pool shared by every commit made meanwhile (see
      // WalSync for why that is as durable as FULL for what was committed).
      this.db.pragma('synchronous = NORMAL');
      const wal = new WalSync(openWalForSync(absolute));
      this.wal = wal;
      // The store's time is read inside the transaction, once the write lock is held, so a
      // wait for the lock (or for the batch) never shortens a lease.
      const writeAll = immediate((writes: Write[]) => {
        // A throw fails the whole batch, renewals and releases included: a restored file
        // answers unavailable to all of them until the epoch is raised.
        if (writes.some((w) => w.kind === 'grant')) guard.check();
        const nowUs = machineMonotonicUs();
        const wallMs = Date.now();
        return writes.map((w) => {
          if (w.kind === 'grant') {
            const expiresWallMs = wallMs + w.request.ttlMs;
            const row = acquire.get(this.grantParams(w.request, nowUs, expiresWallMs));
            return row === undefined ? undefined : { token: row.token, expiresWallMs };
          }
          const lease = { key: w.key, leaseId: w.leaseId, token: w.token };
          if (w.kind === 'release') return release.run(lease).changes === 1;
          const expiresWallMs = wallMs + w.ttlMs;
          const renewed = renew.run({
            ...lease,
            bootId: this.bootId,
            nowUs,
            expiresUs: nowUs + BigInt(w.ttlMs) * 1000n,
            expiresWallMs,
          });
          return renewed.changes === 1 ? expiresWallMs : undefined;
        });
      });
      this.writes = new GroupCommit((writes): WriteResult[] => {
        const results = writeAll(writes);
        // Grants and releases wake waiters (in this process and, through the sidecar, others).
        const changed = writes.filter((w, i) => w.kind !== 'renew' && isDone(results[i]));
        this.feed.announceAll(changed.map((w) => (w.kind === 'grant' ? w.request.key : w.key)));
        // The batch's grants share one sync, started here rather than by each caller a few
        // microtasks later, so that close() finds it running and waits for it.
        let durable: Promise<void> | undefined;
        return results.map((r) => {
          if (typeof r !== 'object') return r;
          if (durable === undefined) {
            durable = wal.durable();
            durable.catch(() => {}); // every grant of the batch awaits it; this marks it handled
          }
          return { ...r, durable };
        });
      });
    }
    this.feed = retainChangeFeed(this.path);
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
        const granted = this.acquireTx(this.grantParams(request, nowUs, expiresWallMs));
        if (granted !== undefined) {
          this.feed.announce(request.key);
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
    const row = this.stmt.select.get({ key: request.key });
    if (row === undefined) return undefined;
    if (!this.isLive(row, nowUs)) {
      if (!hasRoom(row, request)) throw exhaustedError(request.key);
      return undefined;
    }
    if (row.lease_id === request.leaseId) return { status: 'acquired', token: row.token };
    return { status: 'busy', holder: holderOf(row, nowUs), retryAfterMs: remainingMs(row, nowUs) };
  }

  private grantParams(
    request: StoreAcquireRequest,
    nowUs: bigint,
    expiresWallMs: number,
  ): Record<string, unknown> {
    const block = tokenBlockOf(request);
    return {
      key: request.key,
      leaseId: request.leaseId,
      ownerId: request.ownerId,
      tokenBlock: block === 1 ? null : BigInt(block),
      roomTop: LIMITS.maxToken - BigInt(block - 1),
      expiresUs: nowUs + BigInt(request.ttlMs) * 1000n,
      bootId: this.bootId,
      expiresWallMs,
      value: request.value ?? null,
      nowUs,
    };
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
    return this.run(() => {
      const nowUs = machineMonotonicUs();
      const expiresWallMs = Date.now() + lease.ttlMs;
      const changes = this.renewTx({
        key: lease.key,
        leaseId: lease.leaseId,
        token: lease.token,
        bootId: this.bootId,
        nowUs,
        expiresUs: nowUs + BigInt(lease.ttlMs) * 1000n,
        expiresWallMs,
      });
      return changes === 1
        ? { status: 'renewed', expiresAtWallMs: expiresWallMs }
        : { status: 'lost' };
    });
  }

  async release(lease: StoreLeaseRef, _options?: StoreRequestOptions): Promise<StoreReleaseResult> {
    if (this.writes !== undefined) {
      const { key, leaseId, token } = lease;
      const released = await this.submit({ kind: 'release', key, leaseId, token });
      return released === true ? { status: 'released' } : { status: 'not_owner' };
    }
    return this.run(() => {
      const changes = this.releaseTx({
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
      const r = this.handOffTx({
        key: acquire.key,
        nowUs,
        release: { key: release.key, leaseId: release.leaseId, token: release.token },
        acquire: this.grantParams(acquire, nowUs, expiresWallMs),
      });
      if (r.released || r.granted !== undefined) this.feed.announce(acquire.key);
      return { ...r, expiresWallMs, nowUs };
    });
    if (handed.granted !== undefined) await this.durable();
    const released = handed.released ? 'released' : 'not_owner';
    if (handed.granted !== undefined) {
      return {
        released,
        acquired: {
          status: 'acquired',
          token: handed.granted.token,
          expiresAtWallMs: handed.expiresWallMs,
        },
      };
    }
    // Not granted: the key's row holds a live lease (read in the same transaction).
    const row = handed.holder!;
    return {
      released,
      acquired: {
        status: 'busy',
        holder: holderOf(row, handed.nowUs),
        retryAfterMs: remainingMs(row, handed.nowUs),
      },
    };
  }

  inspect(key: string, _options?: StoreRequestOptions): Promise<LeaseState> {
    return this.run(() => {
      const row = this.stmt.select.get({ key });
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
      return this.stmt.list
        .all({ prefix, bootId: this.bootId, nowUs, limit: BigInt(limit) })
        .map((row) => ({ key: row.key, lastToken: topOf(row), holder: holderOf(row, nowUs) }));
    });
  }

  watch(key: string, onChange: () => void): Promise<Unwatch> {
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
      releaseChangeFeed(this.path, this.feed);
      this.guard.close();
      this.db.close();
    })();
    return this.closing;
  }

  private isLive(row: LeaseRow, nowUs: bigint): boolean {
    return row.lease_id !== null && row.boot_id === this.bootId && row.expires_us > nowUs;
  }

  private run<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(closedError());
    try {
      return Promise.resolve(fn());
    } catch (err) {
      if (err instanceof LeaseholdError) return Promise.reject(err);
      return Promise.reject(
        new LeaseholdError('ERR_UNAVAILABLE', `SQLite lease store: ${String(err)}`, { cause: err }),
      );
    }
  }
}

/** Reads and conditional writes per grant before a contended key answers unavailable. */
const MAX_GRANT_ATTEMPTS = 3;

/** A grant committed by a group commit; answered once `durable` resolves. */
interface Granted {
  readonly token: bigint;
  readonly expiresWallMs: number;
  readonly durable: Promise<void>;
}

/** A write that joins the next group commit. */
type Write =
  | { readonly kind: 'grant'; readonly request: StoreAcquireRequest }
  | ({ readonly kind: 'release' } & LeaseParams)
  | ({ readonly kind: 'renew'; readonly ttlMs: number } & LeaseParams);

interface LeaseParams {
  readonly key: string;
  readonly leaseId: string;
  readonly token: bigint;
}

/** Whether a write of a group commit changed its row (see {@link WriteResult}). */
function isDone(result: unknown): boolean {
  return result !== undefined && result !== false;
}

/**
 * Per write kind: a grant gives the grant or undefined (a live holder remains); a release
 * whether it released; a renewal the new wall-clock expiry, or undefined when lost.
 */
type WriteResult = Granted | boolean | number | undefined;

function storeError(err: unknown): LeaseholdError {
  return err instanceof LeaseholdError
    ? err
    : new LeaseholdError('ERR_UNAVAILABLE', `SQLite lease store: ${String(err)}`, { cause: err });
}

/**
 * Opens the WAL file for fdatasync, after fsyncing its directory once: SQLite syncs the
 * directory of a new WAL at the WAL's first sync, which with NORMAL would only come at the first
 * checkpoint, and a WAL whose directory entry is lost in a power cut takes its grants with it.
 */
function openWalForSync(dbPath: string): number {
  const dir = openSync(dirname(dbPath), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
  return openSync(`${dbPath}-wal`, 'r');
}

/** The request's token block, checked (the contract allows 1 to LIMITS.maxTokenBlock). */
function tokenBlockOf(request: StoreAcquireRequest): number {
  const block = request.tokenBlock ?? 1;
  if (!Number.isInteger(block) || block < 1 || block > LIMITS.maxTokenBlock) {
    throw invalidArgument(
      'tokenBlock',
      `must be an integer from 1 to ${LIMITS.maxTokenBlock}`,
      block,
    );
  }
  return block;
}

/** The highest token granted or reserved by the row's last grant: its block's top. */
function topOf(row: LeaseRow): bigint {
  return row.token + (row.token_block ?? 1n) - 1n;
}

/** Whether a grant of `request`'s block after `row`'s would stay within int64. */
function hasRoom(row: LeaseRow, request: StoreAcquireRequest): boolean {
  return topOf(row) + BigInt(tokenBlockOf(request)) <= LIMITS.maxToken;
}

function exhaustedError(key: string): LeaseholdError {
  return new LeaseholdError('ERR_UNAVAILABLE', `token space of ${key} is exhausted`);
}

function contentionError(key: string): LeaseholdError {
  return new LeaseholdError('ERR_UNAVAILABLE', `contention on ${key} did not settle`);
}

function closedError(): LeaseholdError {
  return new LeaseholdError('ERR_CLOSED', 'the SQLite lease store was closed');
}

function remainingMs(row: LeaseRow, nowUs: bigint): number {
  const us = row.expires_us - nowUs;
  return us > 0n ? Number((us + 999n) / 1000n) : 0;
}

function holderOf(row: LeaseRow, nowUs: bigint): HolderInfo {
  return {
    ownerId: row.owner_id ?? '',
    token: row.token,
    remainingMs: remainingMs(row, nowUs),
    leaseIdPrefix: leaseIdPrefix(row.lease_id ?? ''),
    value: row.value ?? undefined,
  };
}

/** Switches to WAL with FULL sync and migrates, retried while another process opens the file. */
function openWithRetry(db: Database.Database, table: string, busyTimeoutMs: number): void {
  retryWhileBusy(busyTimeoutMs, () => {
    // FULL: the WAL is fsync'd at every commit, so a returned token survives power loss.
    useDurableWal(db);
    db.defaultSafeIntegers(true);
    migrate(db, table);
  });
}

/** Applies the numbered migrations not yet applied to `table`, in one immediate transaction. */
function migrate(db: Database.Database, table: string): void {
  db.exec(Q.CREATE_MIGRATIONS_TABLE);
  const applied = db.prepare('SELECT 1 FROM leasehold_migrations WHERE name = ?');
  const record = db.prepare(
    'INSERT INTO leasehold_migrations (name, applied_wall_ms) VALUES (?, ?)',
  );
  db.transaction(() => {
    for (const file of MIGRATIONS) {
      const name = `${table}/${file}`;
      if (applied.get(name) !== undefined) continue;
      const text = readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8');
      let sql = text
        .replaceAll('{{table}}', `"${table}"`)
        .replaceAll('{{block_guard}}', `"${table}_block_guard"`);
      for (const [name, quoted] of Object.entries(epochNames(table))) {
        sql = sql.replaceAll(name, quoted);
      }
      db.exec(sql);
      record.run(name, BigInt(Date.now()));
    }
  }).immediate();
}
