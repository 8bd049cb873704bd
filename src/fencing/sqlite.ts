import Database from 'better-sqlite3';
import { invalidArgument, LeaseholdError } from '../core/errors.js';
import type { FenceResult } from '../core/results.js';
import { parseToken } from '../core/validate.js';
import type { FenceDecisionHook } from '../core/fence-decision.js';
import { checkDecisionHook, tellDecision } from './decision.js';
import { retryWhileBusy, useDurableWal } from '../drivers/sqlite/open-file.js';

export type { FenceDecision, FenceDecisionHook } from '../core/fence-decision.js';

/** How a fence compares a token with the high-water mark. */
export type SqliteFencePolicy = '>=' | '>';

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

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,50}$/;

/** Creates the mark table and the idempotency-key table. Idempotent. */
const CREATE = `
CREATE TABLE IF NOT EXISTS {{t}} (
  scope TEXT PRIMARY KEY NOT NULL,
  hwm INTEGER NOT NULL CHECK (hwm > 0)
) STRICT;
CREATE TABLE IF NOT EXISTS {{op}} (
  scope TEXT NOT NULL,
  token INTEGER NOT NULL,
  op_id TEXT NOT NULL,
  PRIMARY KEY (scope, token, op_id)
) STRICT, WITHOUT ROWID;`;

/**
 * The check and the advance in ONE statement: the row is inserted or raised only when the
 * token passes `{{cmp}}` against the stored mark, so two racing writers cannot both pass with
 * tokens out of order. Params: scope, token. Effect: 1 change when the token passes, 0 when stale.
 */
const ADVANCE = `
INSERT INTO {{t}} (scope, hwm) VALUES (@scope, @token)
ON CONFLICT (scope) DO UPDATE SET hwm = excluded.hwm
WHERE excluded.hwm {{cmp}} {{t}}.hwm`;

/** Params: scope. Returns: hwm (or no row). */
const SELECT_HWM = `SELECT hwm FROM {{t}} WHERE scope = @scope`;

/** Params: scope, token, opId. Returns: one row when this (token, op) was applied before. */
const SELECT_OP = `SELECT 1 AS seen FROM {{op}} WHERE scope = @scope AND token = @token AND op_id = @opId`;

/** Params: scope, token, opId. Records an applied idempotency key. */
const INSERT_OP = `INSERT INTO {{op}} (scope, token, op_id) VALUES (@scope, @token, @opId)`;

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
  private readonly stmt: {
    advance: Database.Statement;
    hwm: Database.Statement;
    selectOp: Database.Statement;
    insertOp: Database.Statement;
  };

  constructor(options: SqliteFenceOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object with a path or a database', options);
    const table = options.table ?? 'leasehold_fence';
    if (!TABLE_NAME.test(table))
      throw invalidArgument('table', 'must be a plain SQL identifier', table);
    const policy = options.policy ?? '>=';
    if (policy !== '>=' && policy !== '>')
      throw invalidArgument('policy', "must be '>=' or '>'", policy);
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
    const sql = (text: string): string =>
      text
        .replaceAll('{{t}}', `"${table}"`)
        .replaceAll('{{op}}', `"${table}_op"`)
        .replaceAll('{{cmp}}', policy);
    this.db.exec(sql(CREATE));
    this.stmt = {
      advance: this.db.prepare(sql(ADVANCE)),
      hwm: this.db.prepare(sql(SELECT_HWM)).safeIntegers(true),
      selectOp: this.db.prepare(sql(SELECT_OP)),
      insertOp: this.db.prepare(sql(INSERT_OP)),
    };
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
    const run = this.db.transaction((): FenceResult<T> => {
      if (opId !== undefined && this.stmt.selectOp.get({ scope, token: tok, opId }) !== undefined)
        return { status: 'duplicate' };
      const passed = this.stmt.advance.run({ scope, token: tok }).changes === 1;
      if (!passed) return { status: 'stale_fence', highWaterMark: this.highWaterMark(scope) };
      const value = mutate(this.db);
      if (opId !== undefined) this.stmt.insertOp.run({ scope, token: tok, opId });
      return { status: 'applied', value };
    });
    let result: FenceResult<T>;
    try {
      result = run.immediate();
    } catch (err) {
      if (isBusy(err))
        throw new LeaseholdError('ERR_UNAVAILABLE', `fence database is locked: ${String(err)}`, {
          cause: err,
        });
      throw err;
    }
    tellDecision(this.onDecision, {
      scope,
      token: tok,
      status: result.status,
      ...(result.status === 'stale_fence' ? { highWaterMark: result.highWaterMark } : {}),
    });
    return result;
  }

  /** The scope's high-water mark (0n when nothing was applied yet). */
  highWaterMark(scope: string): bigint {
    const row = this.stmt.hwm.get({ scope }) as { hwm: bigint } | undefined;
    return row === undefined ? 0n : row.hwm;
  }

  /** Closes the database if the fence opened it. */
  close(): void {
    if (this.ownsDb) this.db.close();
  }
}

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}
