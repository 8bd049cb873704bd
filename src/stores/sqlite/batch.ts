import type { StoreAcquireRequest } from '../../core/store.js';
import type { WalSync } from './batch-wal-sync.js';
import type { RestoreGuard } from './epoch.js';
import { grantParams } from './lease-row.js';
import { machineMonotonicUs } from './machine-time.js';
import type { LeaseTransactions } from './transactions.js';

/**
 * Group commit: the writes asked for in one turn of the event loop (grants, releases and
 * renewals of a group-committing SQLite store) are written in one IMMEDIATE transaction, so
 * they share one commit — and the grants one fsync (see WalSync) — instead of paying one each.
 *
 * Why it is safe: every grant is still decided by its own conditional upsert under SQLite's
 * write lock (tokens increase by one per grant of a key, in upsert order), and no grant is
 * answered before the WAL holding it is on disk. Two grants for one key in one batch: the
 * second upsert sees the first as a live holder and returns no row, and its caller re-reads
 * (busy, or its own grant when the lease ids match). Writes of one batch run in the order they
 * were asked for, which is one order the concurrent callers could have seen anyway. When the
 * commit fails nothing of the batch was written, and every caller gets the error.
 *
 * Why a turn of the event loop: a server reads every request that arrived in one poll phase
 * before `setImmediate` runs, so concurrent requests land in one batch; a lone caller waits
 * one loop turn (microseconds) more than without grouping.
 */
export class GroupCommit<Request, Result> {
  private queue: Array<{
    readonly request: Request;
    readonly resolve: (r: Result) => void;
    readonly reject: (err: unknown) => void;
  }> = [];
  private scheduled = false;

  /**
   * @param commit writes a batch in one transaction and returns one result per request, in
   *   order; it throws when the transaction did not commit.
   * @param maxBatch most requests per transaction; the rest go in the next turn.
   */
  constructor(
    private readonly commit: (batch: Request[]) => Result[],
    private readonly maxBatch = 256,
  ) {}

  /** How many requests wait for the next commit. */
  get pending(): number {
    return this.queue.length;
  }

  /** Queues `request` for the next commit; resolves once it has committed. */
  submit(request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Commits what is queued now (at most `maxBatch`; a remainder is scheduled). */
  flush(): void {
    this.scheduled = false;
    const batch = this.queue.splice(0, this.maxBatch);
    if (this.queue.length > 0) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    if (batch.length === 0) return;
    let results: Result[];
    try {
      results = this.commit(batch.map((b) => b.request));
    } catch (err) {
      for (const b of batch) b.reject(err);
      return;
    }
    batch.forEach((b, i) => b.resolve(results[i]!));
  }
}

/** A grant committed by a group commit; answered once `durable` resolves. */
export interface Granted {
  readonly token: bigint;
  readonly expiresWallMs: number;
  readonly durable: Promise<void>;
}

/** A write that joins the next group commit. */
export type Write =
  | { readonly kind: 'grant'; readonly request: StoreAcquireRequest }
  | ({ readonly kind: 'release' } & LeaseParams)
  | ({ readonly kind: 'renew'; readonly ttlMs: number } & LeaseParams);

interface LeaseParams {
  readonly key: string;
  readonly leaseId: string;
  readonly token: bigint;
}

/**
 * Per write kind: a grant gives the grant or undefined (a live holder remains); a release
 * whether it released; a renewal the new wall-clock expiry, or undefined when lost.
 */
export type WriteResult = Granted | boolean | number | undefined;

/** Whether a write of a group commit changed its row (see {@link WriteResult}). */
function isDone(result: unknown): boolean {
  return result !== undefined && result !== false;
}

/** What the lease writes of a group-committing store need. */
export interface LeaseBatchContext {
  readonly tx: LeaseTransactions;
  readonly guard: RestoreGuard;
  readonly bootId: string;
  /** The grants' durability barrier: an fdatasync of the WAL. */
  readonly wal: WalSync;
  /**
   * Called after the commit with the keys whose grants and releases committed, and those of
   * them whose last write granted them.
   */
  readonly changed: (keys: string[], granted: ReadonlySet<string>) => void;
}

/**
 * The group commit of a SQLite store's lease writes: every write of a batch in one IMMEDIATE
 * transaction; the grants of the batch share one {@link WalSync.durable}.
 */
export function createLeaseBatch(ctx: LeaseBatchContext): GroupCommit<Write, WriteResult> {
  const { tx, guard, bootId, wal } = ctx;
  const { acquire, release, renew } = tx.stmt;
  // The store's time is read inside the transaction, once the write lock is held, so a
  // wait for the lock (or for the batch) never shortens a lease.
  const writeAll = tx.immediate((writes: Write[]) => {
    // A throw fails the whole batch, renewals and releases included: a restored file
    // answers unavailable to all of them until the epoch is raised.
    if (writes.some((w) => w.kind === 'grant')) guard.check();
    const nowUs = machineMonotonicUs();
    const wallMs = Date.now();
    return writes.map((w): Omit<Granted, 'durable'> | boolean | number | undefined => {
      if (w.kind === 'grant') {
        const expiresWallMs = wallMs + w.request.ttlMs;
        const row = acquire.get(grantParams(w.request, nowUs, expiresWallMs, bootId));
        return row === undefined ? undefined : { token: row.token, expiresWallMs };
      }
      const lease = { key: w.key, leaseId: w.leaseId, token: w.token };
      if (w.kind === 'release') return release.run(lease).changes === 1;
      const expiresWallMs = wallMs + w.ttlMs;
      const renewed = renew.run({
        ...lease,
        bootId,
        nowUs,
        expiresUs: nowUs + BigInt(w.ttlMs) * 1000n,
        expiresWallMs,
      });
      return renewed.changes === 1 ? expiresWallMs : undefined;
    });
  });
  return new GroupCommit((writes): WriteResult[] => {
    const results = writeAll(writes);
    // Grants and releases wake waiters (in this process and, through the sidecar, others).
    const changed = writes.filter((w, i) => w.kind !== 'renew' && isDone(results[i]));
    // Per key, whether its last write in this commit granted it (then it is held again).
    const last = new Map<string, boolean>();
    for (const w of changed)
      last.set(w.kind === 'grant' ? w.request.key : w.key, w.kind === 'grant');
    const granted = new Set<string>();
    for (const [key, grant] of last) if (grant) granted.add(key);
    ctx.changed([...last.keys()], granted);
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
