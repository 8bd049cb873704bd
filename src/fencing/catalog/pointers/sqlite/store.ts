import type Database from 'better-sqlite3';
import { invalidArgument, LeaseholdError } from '../../../../core/errors.js';
import type { ClaimResult } from '../../../../core/results.js';
import { booleanOption } from '../../../../core/runtime/options.js';
import { SqliteFence } from '../../../sqlite.js';
import type { PointerStore, PublishRequest, Tombstone } from '../../pointer-store.js';
import type { CatalogEntry, PublishResult } from '../../results.js';
import { catalogNames, migrateCatalog, openCatalogFile, requireCatalog } from './open.js';
import { claimName, firstPublishMark } from './claim.js';
import * as Q from './queries.js';
import {
  collectedMidStage,
  entryOf,
  mapValues,
  preparedOnFirstUse,
  storeError,
  wrongKey,
  type PointerRow,
} from './rows.js';
import type { SqlitePointerStoreOptions } from './options.js';

export type { SqlitePointerStoreOptions } from './options.js';

/** Most publishes in one group commit; more wait for the next. */
const MAX_BATCH = 256;

/** Thrown inside the publish transaction to roll back whatever it wrote, with a result. */
class Refusal extends Error {
  constructor(readonly result: PublishResult) {
    super(result.status);
  }
}

/** One publish's outcome in a group commit: its result, or the error only it ran into. */
type Outcome = { readonly result: PublishResult } | { readonly error: unknown };

/**
 * The catalog's pointer store in SQLite: the pointer, history and object registry in one
 * database file. A publish decides as {@link SqliteFence} decides, against the mark kept in
 * the name's pointer row (decision 021), and moves the pointer with it, in a `BEGIN
 * IMMEDIATE` transaction; the publishes that meet (see {@link SqlitePointerStore.publish}) share that
 * transaction and its commit, each in its own savepoint (decision 024). Single machine, like
 * the SQLite lease store; `synchronous = FULL` when it opens the file, and a publish is
 * answered only after its commit, so an acknowledged publish survives a crash.
 *
 * @example
 * const pointers = new SqlitePointerStore({ path: '/var/lib/reports/catalog.db' });
 */
export class SqlitePointerStore implements PointerStore {
  readonly description: string;
  private readonly db: Database.Database;
  private readonly ownsDb: boolean;
  private readonly strict: boolean;
  private readonly commitPublishes: (reqs: PublishRequest[]) => Outcome[];
  /** Publishes asked for since the last commit; committed by a queued microtask. */
  private queued: {
    readonly req: PublishRequest;
    readonly resolve: (o: Outcome) => void;
    readonly reject: (err: unknown) => void;
  }[] = [];
  private readonly now: () => number;
  private readonly s: Record<
    Exclude<keyof typeof Q, 'CREATE_MIGRATIONS' | 'CATALOG_PRESENT'>,
    Database.Statement
  >;
  private readonly gcTx: (cutoff: number, limit: number) => Tombstone[];
  private closed = false;

  constructor(options: SqlitePointerStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw invalidArgument('options', 'must be an object with a path or a database', options);
    }
    const prefix = options.tablePrefix ?? 'leasehold_catalog';
    const { names, fill } = catalogNames(prefix);
    const now = options.now ?? Date.now;
    if (typeof now !== 'function') throw invalidArgument('now', 'must be a function', now);
    this.now = now;
    const autoMigrate = booleanOption('autoMigrate', options.autoMigrate, true);
    if (options.database !== undefined) {
      this.db = options.database;
      this.ownsDb = false;
      this.description = `sqlite:${this.db.name}`;
      if (!autoMigrate) requireCatalog(this.db, prefix, this.db.name);
    } else {
      if (typeof options.path !== 'string' || options.path === '' || options.path === ':memory:') {
        throw invalidArgument('path', 'must be a database file path', options.path);
      }
      this.db = openCatalogFile(options.path, options.busyTimeoutMs ?? 5000, autoMigrate, prefix);
      this.ownsDb = true;
      this.description = `sqlite:${options.path}`;
    }
    const policy = options.policy ?? '>=';
    if (policy !== '>=' && policy !== '>')
      throw invalidArgument('policy', "must be '>=' or '>'", options.policy);
    this.strict = policy === '>';
    if (autoMigrate) {
      try {
        // The fence's tables first (the fence object only creates them): version 2 reads the
        // marks of names fenced before it and keeps idempotency keys in the fence's table.
        new SqliteFence({ database: this.db, table: `${prefix}_fence`, policy });
        migrateCatalog(this.db, names, fill);
      } catch (err) {
        if (this.ownsDb) this.db.close();
        throw err;
      }
    }
    const { CREATE_MIGRATIONS: _create, CATALOG_PRESENT: _present, ...statements } = Q;
    const prepare = (sql: string): Database.Statement =>
      this.db.prepare(fill(sql)).safeIntegers(true);
    // Without migrating, the catalog may be of an older version, and SQLite refuses to prepare
    // a statement that names a table it does not have yet (gc_mark before version 4): each
    // statement is prepared when first used, so the reads work on every version.
    this.s = autoMigrate ? mapValues(statements, prepare) : preparedOnFirstUse(statements, prepare);
    // One immediate transaction, so no publish runs in between: the retention starts from
    // the history first, then the tombstones (decision 028).
    const gc = this.db.transaction((cutoff: number, limit: number): Tombstone[] => {
      this.s.BEGIN_GC_SESSION.run();
      this.s.START_RETENTION.run();
      this.s.MOVE_GC_MARKS.run();
      this.s.TOMBSTONE.run({ cutoff, limit });
      const rows = this.s.SELECT_TOMBSTONED.all({ limit }) as { handle: string; size: bigint }[];
      this.s.END_GC_SESSION.run();
      return rows.map((r) => ({ handle: r.handle, size: Number(r.size) }));
    });
    this.gcTx = (cutoff, limit) => gc.immediate(cutoff, limit);
    // Nested in the batch's transaction, better-sqlite3 runs `one` in a savepoint: a refusal
    // or an error rolls back that publish alone.
    const one = this.db.transaction((req: PublishRequest) => this.decide(req));
    const many = this.db.transaction((reqs: PublishRequest[]): Outcome[] =>
      reqs.map((req) => {
        try {
          return { result: one(req) };
        } catch (err) {
          if (err instanceof Refusal) return { result: err.result };
          // SQLite ends the whole transaction on some errors (SQLITE_FULL, SQLITE_IOERR,
          // …): the publishes before this one are gone too, so none may be answered.
          if (!this.db.inTransaction) throw err;
          return { error: err };
        }
      }),
    );
    this.commitPublishes = (reqs): Outcome[] => {
      if (reqs.length > 1) return many.immediate(reqs);
      try {
        return [{ result: one.immediate(reqs[0]!) }];
      } catch (err) {
        if (err instanceof Refusal) return [{ result: err.result }];
        return [{ error: err }];
      }
    };
  }

  register(handle: string, name: string, token: bigint, leaseId: string): Promise<void> {
    return this.run(() => {
      this.s.REGISTER.run({ handle, name, token, leaseId, now: this.wallNow() });
    });
  }

  complete(handle: string, size: number, checksum: string): Promise<void> {
    return this.run(() => {
      if (this.s.COMPLETE.run({ handle, size, checksum }).changes !== 1) {
        // Only a collector that tombstoned the row mid-stage gets here (retention shorter than the write).
        throw collectedMidStage(handle);
      }
    });
  }

  /**
   * Joins the next group commit and resolves once it has committed: with `synchronous =
   * FULL`, once it is on disk. The commit runs in a microtask queued by the first publish
   * since the last commit, so it takes every publish asked for before the microtasks pending
   * then have run (callers a commit answered that publish again at once meet there). A
   * microtask, not a loop turn: a lone publish makes no extra system call and gives up no
   * time slice on a busy machine (measured at load 7–9: with a `setImmediate` here a
   * 1-worker publish fell from 0.62× to 0.38× of the raw UPDATE).
   */
  async publish(req: PublishRequest): Promise<PublishResult> {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the catalog pointer store was closed');
    const outcome = await new Promise<Outcome>((resolve, reject) => {
      this.queued.push({ req, resolve, reject });
      if (this.queued.length === 1) queueMicrotask(() => this.flushPublishes());
    });
    if ('error' in outcome) throw storeError(outcome.error);
    return outcome.result;
  }

  /** Commits the queued publishes in one transaction and answers each. */
  private flushPublishes(): void {
    const batch = this.queued.splice(0, MAX_BATCH);
    if (this.queued.length > 0) queueMicrotask(() => this.flushPublishes());
    if (batch.length === 0) return;
    let outcomes: Outcome[];
    try {
      outcomes = this.commitPublishes(batch.map((q) => q.req));
    } catch (err) {
      const e = storeError(err);
      for (const q of batch) q.reject(e);
      return;
    }
    batch.forEach((q, i) => q.resolve(outcomes[i]!));
  }

  /**
   * One publish, inside its immediate transaction (or its savepoint of a group commit): first
   * the name's lease key (another key throws `ERR_INVALID_ARGUMENT`); then the fence's
   * decision in the fence's order (an idempotency key already applied under this token is
   * `duplicate`; then a lower token, or an equal one under `'>'`, is `stale_fence`), against
   * the mark in the pointer row; then the object and the expected version; then the pointer,
   * history and registry move. A Refusal rolls back whatever was written.
   *
   * Without an idempotency key the common publish takes one UPDATE that checks all of that
   * and moves the pointer (PUBLISH_FAST) instead of two reads and an UPDATE, then the history
   * row, and no registry row. When that UPDATE changes no row it wrote nothing, and the full
   * decision below answers.
   */
  private decide(req: PublishRequest): PublishResult {
    const key = req.idempotencyKey;
    if (key === undefined) {
      const now = this.wallNow();
      const moved = this.s.PUBLISH_FAST.get({
        name: req.name,
        handle: req.handle,
        token: req.token,
        leaseKey: req.leaseKey,
        leaseId: req.leaseId,
        expected: req.expectedVersion ?? null,
        strict: this.strict ? 1 : 0,
        now,
      }) as { version: bigint; previous_handle: string | null } | undefined;
      if (moved !== undefined) {
        // No registry row: the collector reads when the previous object was replaced from
        // this history row (decision 028).
        this.s.INSERT_HISTORY_OF_POINTER.run({ name: req.name });
        const previousHandle = moved.previous_handle ?? undefined;
        return { status: 'applied', version: Number(moved.version), previousHandle };
      }
    }
    const cur = this.s.SELECT_POINTER.get({ name: req.name }) as PointerRow | undefined;
    // The key before the fence: tokens of different lease keys do not compare, so a token of
    // another key is neither a duplicate nor stale (answering stale_fence would tell the
    // caller a newer owner published).
    if (cur !== undefined && cur.lease_key !== req.leaseKey) throw wrongKey(req, cur.lease_key);
    if (key !== undefined) {
      const seen = this.s.SELECT_OP.get({ name: req.name, token: req.token, idempotencyKey: key });
      if (seen !== undefined) return this.duplicate(req.name, req.token, key);
    }
    const mark = cur !== undefined ? cur.high_water : firstPublishMark(this.s, req.name);
    if (req.token < mark || (this.strict && req.token === mark)) {
      return { status: 'stale_fence', highWaterMark: mark };
    }
    const result = this.move(req, cur);
    if (key !== undefined) {
      this.s.INSERT_OP.run({ name: req.name, token: req.token, idempotencyKey: key });
    }
    return result;
  }

  private duplicate(name: string, token: bigint, idempotencyKey: string): PublishResult {
    const row = this.s.SELECT_DUPLICATE.get({ name, token, idempotencyKey }) as
      { version: bigint } | undefined;
    return { status: 'duplicate', version: row === undefined ? undefined : Number(row.version) };
  }

  /** The pointer move, after the key and the fence passed; a Refusal rolls the transaction back. */
  private move(req: PublishRequest, cur: PointerRow | undefined): PublishResult {
    const obj = this.s.SELECT_OBJECT.get({ handle: req.handle }) as
      { name: string; state: string; size: bigint | null; checksum: string | null } | undefined;
    if (
      obj === undefined ||
      obj.name !== req.name ||
      obj.state === 'tombstoned' ||
      obj.size === null ||
      obj.checksum === null
    ) {
      throw new Refusal({ status: 'not_staged' });
    }
    const currentVersion = cur === undefined ? 0 : Number(cur.version);
    if (req.expectedVersion !== undefined && req.expectedVersion !== currentVersion) {
      throw new Refusal({ status: 'version_conflict', currentVersion });
    }
    const now = this.wallNow();
    const version = currentVersion + 1;
    const row = {
      name: req.name,
      handle: req.handle,
      token: req.token,
      leaseKey: req.leaseKey,
      leaseId: req.leaseId,
      version,
      size: obj.size,
      checksum: obj.checksum,
      now,
    };
    if (cur === undefined) this.s.INSERT_POINTER.run(row);
    else this.s.UPDATE_POINTER.run(row);
    this.s.INSERT_HISTORY.run({ ...row, idempotencyKey: req.idempotencyKey ?? null });
    const previousHandle = cur?.handle;
    this.reference(req.handle, previousHandle, now);
    return { status: 'applied', version, previousHandle };
  }

  /** The registry side of a pointer move: the new object referenced, the previous one unreferenced from now. */
  private reference(handle: string, previousHandle: string | undefined, now: number): void {
    this.s.MARK_REFERENCED.run({ handle });
    if (previousHandle !== undefined && previousHandle !== handle) {
      this.s.MARK_UNREFERENCED.run({ handle: previousHandle, now });
    }
  }

  /**
   * Claim before start, in one immediate transaction: the mark in the pointer row, or in the
   * fence row of a name not yet published (where a first publish reads it), rises to the
   * token — to the token − 1 under `'>'`, whose publishes must be above the mark, so the
   * claimed token's one publish still passes (as the PostgreSQL pointer store does). Applied
   * exactly when a publish at the token would pass the mark now; under `'>'` a claim of a
   * token that has published answers `stale_fence`. Committed before it answers.
   */
  claim(name: string, token: bigint): Promise<ClaimResult> {
    return this.run(() => claimName(this.db, this.s, name, this.strict ? token - 1n : token));
  }

  pointer(name: string): Promise<CatalogEntry | undefined> {
    return this.run(() => {
      const row = this.s.SELECT_POINTER.get({ name }) as PointerRow | undefined;
      return row === undefined ? undefined : entryOf(row);
    });
  }

  history(name: string, limit: number): Promise<CatalogEntry[]> {
    return this.run(() =>
      (this.s.SELECT_HISTORY.all({ name, limit }) as PointerRow[]).map(entryOf),
    );
  }

  list(prefix: string, limit: number): Promise<CatalogEntry[]> {
    // A range instead of LIKE: no wildcard escaping, and it uses the primary key.
    const lo = prefix;
    const hi =
      prefix === ''
        ? '\u{10ffff}'
        : prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    return this.run(() => (this.s.SELECT_LIST.all({ lo, hi, limit }) as PointerRow[]).map(entryOf));
  }

  tombstone(retentionMs: number, limit: number): Promise<Tombstone[]> {
    return this.run(() => this.gcTx(this.wallNow() - retentionMs, limit));
  }

  forget(handles: readonly string[]): Promise<void> {
    return this.run(() => {
      this.db
        .transaction(() => {
          for (const handle of handles) this.s.FORGET.run({ handle });
        })
        .immediate();
    });
  }

  registered(handles: readonly string[]): Promise<Set<string>> {
    return this.run(
      () => new Set(handles.filter((handle) => this.s.IS_REGISTERED.get({ handle }) !== undefined)),
    );
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      // Publishes already asked for commit (and are answered) before the handle closes.
      while (this.queued.length > 0) this.flushPublishes();
      if (this.ownsDb) this.db.close();
    }
    return Promise.resolve();
  }

  private wallNow(): number {
    const t = this.now();
    if (!Number.isFinite(t))
      throw new LeaseholdError('ERR_CLOCK', `the catalog clock returned ${t}`);
    return Math.floor(t);
  }

  /** Runs a synchronous step; a locked database becomes ERR_UNAVAILABLE, as everywhere. */
  private run<T>(step: () => T): Promise<T> {
    if (this.closed)
      return Promise.reject(
        new LeaseholdError('ERR_CLOSED', 'the catalog pointer store was closed'),
      );
    try {
      return Promise.resolve(step());
    } catch (err) {
      return Promise.reject(storeError(err));
    }
  }
}
