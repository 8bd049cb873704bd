/**
 * The SQLite fence's decision: its tables and statements, run inside a transaction the caller
 * holds — `SqliteFence`'s own `BEGIN IMMEDIATE`, or yours (`fenceInSqlite` in
 * `leasehold/fencing/in-transaction`). One implementation for both. Imports no driver: the
 * handle is the part of a better-sqlite3 `Database` used here.
 */
import { invalidArgument } from '../core/errors.js';
import type { FenceResult } from '../core/results.js';

/** How a fence compares a token with the high-water mark. */
export type SqliteFencePolicy = '>=' | '>';

/** A prepared statement: the part of better-sqlite3's used here. */
export interface SqliteStatement {
  run(...params: Record<string, unknown>[]): { changes: number };
  get(...params: Record<string, unknown>[]): unknown;
  all(...params: Record<string, unknown>[]): unknown[];
  pluck(): SqliteStatement;
  safeIntegers(on: boolean): SqliteStatement;
}

/** A better-sqlite3 `Database`: the part the fence's decision uses. */
export interface SqliteHandle {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,50}$/;

/**
 * Creates the mark table and the idempotency-key table. Idempotent. `claimed` is 1 while the
 * mark was installed by a claim and no write at the mark has been accepted since (see
 * {@link SqliteFence.claim}).
 */
const CREATE = `
CREATE TABLE IF NOT EXISTS {{t}} (
  scope TEXT PRIMARY KEY NOT NULL,
  hwm INTEGER NOT NULL CHECK (hwm > 0),
  claimed INTEGER NOT NULL DEFAULT 0 CHECK (claimed IN (0, 1))
) STRICT;
CREATE TABLE IF NOT EXISTS {{op}} (
  scope TEXT NOT NULL,
  token INTEGER NOT NULL,
  op_id TEXT NOT NULL,
  PRIMARY KEY (scope, token, op_id)
) STRICT, WITHOUT ROWID;`;

/** Mark tables made before claims get the column. Params: none. */
const ADD_CLAIMED = `ALTER TABLE {{t}} ADD COLUMN claimed INTEGER NOT NULL DEFAULT 0 CHECK (claimed IN (0, 1))`;
/** Params: none. Returns one row per column of the mark table. */
const MARK_COLUMNS = `SELECT name FROM pragma_table_info({{t_name}})`;

/**
 * The check and the advance in ONE statement, for writes and claims alike: the row is
 * inserted or raised only when the token passes `{{pass}}` against the stored mark, so two
 * racing writers cannot both pass with tokens out of order. A write clears `claimed`; a claim
 * sets it when it raised the mark and keeps it when the mark already was its token.
 * Params: scope, token, claim (1 for a claim, 0 for a write). Effect: 1 change when the token
 * passes, 0 when stale.
 */
const ADVANCE = `
INSERT INTO {{t}} (scope, hwm, claimed) VALUES (@scope, @token, @claim)
ON CONFLICT (scope) DO UPDATE SET hwm = excluded.hwm,
  claimed = CASE WHEN excluded.claimed = 1 THEN ({{t}}.hwm < excluded.hwm OR {{t}}.claimed) ELSE 0 END
WHERE {{pass}}`;

/**
 * When a token passes the mark, per policy: `>=` not below it; `>` above it, or equal to a
 * mark a claim installed that no write has used yet (the grant's one write is still to come).
 */
const PASSES = {
  '>=': '{{t}}.hwm <= excluded.hwm',
  '>': '({{t}}.hwm < excluded.hwm OR ({{t}}.hwm = excluded.hwm AND {{t}}.claimed = 1))',
} as const;

/** Params: scope. Returns: hwm (or no row). */
const SELECT_HWM = `SELECT hwm FROM {{t}} WHERE scope = @scope`;

/** Params: scope, token, opId. Returns: one row when this (token, op) was applied before. */
const SELECT_OP = `SELECT 1 AS seen FROM {{op}} WHERE scope = @scope AND token = @token AND op_id = @opId`;

/** Params: scope, token, opId. Records an applied idempotency key. */
const INSERT_OP = `INSERT INTO {{op}} (scope, token, op_id) VALUES (@scope, @token, @opId)`;

/** Checks a mark table's name: a plain SQL identifier. */
export function checkTableName(table: unknown): string {
  if (typeof table !== 'string' || !TABLE_NAME.test(table))
    throw invalidArgument('table', 'must be a plain SQL identifier', table);
  return table;
}

/** Checks a policy. */
export function checkPolicy(policy: unknown): SqliteFencePolicy {
  if (policy !== '>=' && policy !== '>')
    throw invalidArgument('policy', "must be '>=' or '>'", policy);
  return policy;
}

/**
 * One fence's statements on one handle. Creating it creates (or upgrades) the tables. Its
 * {@link SqliteFenceDecision.decide} must run inside a transaction that writes (`BEGIN
 * IMMEDIATE`): the check, the advance and the write commit or roll back together with it.
 */
export class SqliteFenceDecision {
  private readonly advance: SqliteStatement;
  private readonly hwm: SqliteStatement;
  private readonly selectOp: SqliteStatement;
  private readonly insertOp: SqliteStatement;

  constructor(
    private readonly db: SqliteHandle,
    table: string,
    policy: SqliteFencePolicy,
  ) {
    const sql = (text: string): string =>
      text
        .replaceAll('{{pass}}', PASSES[policy])
        .replaceAll('{{t}}', `"${table}"`)
        .replaceAll('{{t_name}}', `'${table}'`)
        .replaceAll('{{op}}', `"${table}_op"`);
    db.exec(sql(CREATE));
    const columns = db.prepare(sql(MARK_COLUMNS)).pluck().all() as string[];
    if (!columns.includes('claimed')) db.exec(sql(ADD_CLAIMED));
    this.advance = db.prepare(sql(ADVANCE));
    this.hwm = db.prepare(sql(SELECT_HWM)).safeIntegers(true);
    this.selectOp = db.prepare(sql(SELECT_OP));
    this.insertOp = db.prepare(sql(INSERT_OP));
  }

  /**
   * The one decision of writes and claims (`write` undefined): check and advance the mark
   * and, when it passed, run the write and record the idempotency key.
   */
  decide<T>(
    scope: string,
    token: bigint,
    opId: string | undefined,
    write: ((db: never) => T) | undefined,
  ): FenceResult<T | undefined> {
    const claim = write === undefined ? 1 : 0;
    if (opId !== undefined && this.selectOp.get({ scope, token, opId }) !== undefined) {
      // Below the mark, a retried key is stale like any other write of its token: the writer
      // learns it lost whether or not the key is still kept (decision 038).
      const hwm = this.highWaterMark(scope);
      return token < hwm ? { status: 'stale_fence', highWaterMark: hwm } : { status: 'duplicate' };
    }
    const passed = this.advance.run({ scope, token, claim }).changes === 1;
    if (!passed) return { status: 'stale_fence', highWaterMark: this.highWaterMark(scope) };
    const value = write?.(this.db as never);
    if (opId !== undefined) this.insertOp.run({ scope, token, opId });
    return { status: 'applied', value };
  }

  /** The scope's high-water mark (0n when nothing was applied yet). */
  highWaterMark(scope: string): bigint {
    const row = this.hwm.get({ scope }) as { hwm: bigint } | undefined;
    return row === undefined ? 0n : row.hwm;
  }
}
