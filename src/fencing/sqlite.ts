import Database from 'better-sqlite3';
import { invalidArgument, LeaseholdError } from '../core/errors.js';
import type { ClaimResult, FenceResult } from '../core/results.js';
import { parseToken } from '../core/validate.js';
import type { FenceDecisionHook } from '../core/fence-decision.js';
import { checkDecisionHook, claimDecision, tellDecision } from './decision.js';
import { retryWhileBusy, useDurableWal } from '../drivers/sqlite/open-file.js';
import {
  checkPolicy,
  checkTableName,
  SqliteFenceDecision,
  type SqliteFencePolicy,
} from './sqlite-decision.js';

export type { FenceDecision, FenceDecisionHook } from '../core/fence-decision.js';

export type { SqliteFencePolicy } from './sqlite-decision.js';

/** Options for {@link SqliteFence}. */
export interface SqliteFenceOptions {
  /** The database file holding the protected data. Give this or `database`. */
  readonly path?: string;
  /**
   * An open better-sqlite3 handle to the database holding the protected data, so the mark and
   * your mutation commit in one transaction. The fence never closes a handle it did not open.
   */
  readonly database?: Database.Database;
  /** The high-water-mark table; `<table>_op` keeps applied idempotency keys. Defaults to `leasehold_fence`. */
  readonly table?: string;
  /**
   * `>=` lets several writes under one lease through (the mark only rises); `>` allows one
   * write per grant. Defaults to `>=`.
   */
  readonly policy?: SqliteFencePolicy;
  /** How long to wait for another writer's lock when opening by `path`. Defaults to 2000 ms. */
  readonly busyTimeoutMs?: number;
  /**
   * Told every decision once it is final (committed), e.g. to report stale rejections to the
   * lease server (`createFenceReporter` in `leasehold/http`). Defaults to none.
   */
  readonly onDecision?: FenceDecisionHook;
}

/**
 * A fence for data kept in SQLite: a durable high-water mark per scope, checked and advanced
 * atomically with your mutation, in one `BEGIN IMMEDIATE` transaction.
 *
 * - `applied`: the token passed and `mutate` ran; mark and data committed together
 *   (`synchronous = FULL` when the fence opened the file), so after a crash the mark is at
 *   least every token that was acknowledged.
 * - `duplicate`: this `(token, opId)` was applied before; nothing ran again.
 * - `stale_fence`: a newer token has reached the scope; `mutate` did not run. Definitive: do
 *   not retry under the same lease.
 * - `mutate` throwing rolls everything back (the mark included) and the error propagates.
 * - {@link SqliteFence.claim} installs a generation with no write (claim before start).
 *
 * @example
 * const fence = new SqliteFence({ database: db });
 * const r = fence.apply('report/july', lease.token, (db) =>
 *   db.prepare('UPDATE reports SET body = ? WHERE id = ?').run(body, 'july'),
 * );
 * if (r.status === 'stale_fence') throw new Error(`superseded by token ${r.highWaterMark}`);
 */
export class SqliteFence {
  readonly policy: SqliteFencePolicy;
  private readonly db: Database.Database;
  private readonly ownsDb: boolean;
  private readonly onDecision: FenceDecisionHook | undefined;
  private readonly decision: SqliteFenceDecision;

  constructor(options: SqliteFenceOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object with a path or a database', options);
    const table = checkTableName(options.table ?? 'leasehold_fence');
    const policy = checkPolicy(options.policy ?? '>=');
    this.policy = policy;
    this.onDecision = checkDecisionHook(options.onDecision);
    if (options.database !== undefined) {
      this.db = options.database;
      this.ownsDb = false;
    } else {
      if (typeof options.path !== 'string' || options.path === '' || options.path === ':memory:')
        throw invalidArgument('path', 'must be a database file path', options.path);
      const busy = options.busyTimeoutMs ?? 2000;
      try {
        const db = new Database(options.path, { timeout: busy });
        this.db = db;
        // FULL: a commit is fsync'd before apply() returns, so an acknowledged mark survives a crash.
        retryWhileBusy(busy, () => useDurableWal(db));
      } catch (err) {
        throw new LeaseholdError(
          'ERR_UNAVAILABLE',
          `cannot open fence database ${options.path}: ${String(err)}`,
          {
            cause: err,
          },
        );
      }
      this.ownsDb = true;
    }
    this.decision = new SqliteFenceDecision(this.db, table, policy);
  }

  /**
   * Runs `mutate` if `token` passes the fence for `scope`, atomically with advancing the mark.
   * `opId` makes a retry of the same write under the same token a `duplicate` instead of a
   * second application. Throws `ERR_INVALID_ARGUMENT` for a malformed token (numbers are
   * refused: tokens are int64), `ERR_UNAVAILABLE` when the database is locked too long.
   */
  apply<T>(
    scope: string,
    token: bigint | string,
    mutate: (db: Database.Database) => T,
    options: { opId?: string } = {},
  ): FenceResult<T> {
    if (typeof scope !== 'string' || scope === '')
      throw invalidArgument('scope', 'must be a non-empty string', scope);
    const tok = parseToken(token);
    const opId = options.opId;
    if (opId !== undefined && (typeof opId !== 'string' || opId === ''))
      throw invalidArgument('opId', 'must be a non-empty string', opId);
    // With a write, `applied` carries its value.
    const result = this.decide(scope, tok, opId, mutate) as FenceResult<T>;
    tellDecision(this.onDecision, {
      scope,
      token: tok,
      status: result.status,
      ...(result.status === 'stale_fence' ? { highWaterMark: result.highWaterMark } : {}),
    });
    return result;
  }

  /**
   * Claim before start (DESIGN §4): installs `token`'s generation on `scope` with no domain
   * write, durably (one committed transaction, fsync'd like a write's), so that no write with
   * a lower token is accepted here from now on — even before this token's first write.
   *
   * The rule, the same in every fence: a claim at T answers `applied` exactly when a write at
   * T would pass now, and then leaves the mark at T (moved, or already there) without using
   * T's write:
   * - `>=`: applied when T ≥ mark. Tokens below T are refused; T writes as often as before.
   * - `>` (one write per grant): applied when T > mark, or T = mark installed by a claim not
   *   yet used by a write (so a repeated claim is idempotent). The mark then refuses every
   *   token below T, and T's one write still passes: the first write at T clears the claim,
   *   and the next write at T is refused as before. A claim at T after T has written answers
   *   `stale_fence` (T's write is spent).
   * - Otherwise `stale_fence` with the mark: a newer owner claimed or wrote; nothing changed.
   *
   * Throws `ERR_INVALID_ARGUMENT` for a malformed scope or token, `ERR_UNAVAILABLE` when the
   * database is locked too long. Told to `onDecision` with `op: 'claim'`.
   *
   * @example
   * const r = fence.claim('report/july', lease.token);
   * if (r.status === 'stale_fence') await lease.release(); // superseded before starting
   */
  claim(scope: string, token: bigint | string): ClaimResult {
    if (typeof scope !== 'string' || scope === '')
      throw invalidArgument('scope', 'must be a non-empty string', scope);
    const t = parseToken(token);
    const r = this.decide(scope, t, undefined, undefined);
    tellDecision(this.onDecision, claimDecision(scope, t, r));
    return r.status === 'stale_fence' ? r : CLAIM_APPLIED;
  }

  /**
   * The one decision of writes and claims (`mutate` undefined): check and advance the mark
   * and, when it passed, run the write, in one `BEGIN IMMEDIATE` transaction.
   */
  private decide<T>(
    scope: string,
    tok: bigint,
    opId: string | undefined,
    mutate: ((db: Database.Database) => T) | undefined,
  ): FenceResult<T | undefined> {
    const run = this.db.transaction(() => this.decision.decide(scope, tok, opId, mutate));
    try {
      return run.immediate();
    } catch (err) {
      if (isBusy(err))
        throw new LeaseholdError('ERR_UNAVAILABLE', `fence database is locked: ${String(err)}`, {
          cause: err,
        });
      throw err;
    }
  }

  /** The scope's high-water mark (0n when nothing was applied yet). */
  highWaterMark(scope: string): bigint {
    return this.decision.highWaterMark(scope);
  }

  /** Closes the database if the fence opened it. */
  close(): void {
    if (this.ownsDb) this.db.close();
  }
}

const CLAIM_APPLIED: ClaimResult = Object.freeze({ status: 'applied' });

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}
