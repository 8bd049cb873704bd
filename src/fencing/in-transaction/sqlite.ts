import { invalidArgument } from '../../core/errors.js';
import type { ClaimResult, FenceResult } from '../../core/results.js';
import { requireObject } from '../../core/runtime/options.js';
import { parseToken } from '../../core/validate.js';
import {
  checkPolicy,
  checkTableName,
  SqliteFenceDecision,
  type SqliteFencePolicy,
  type SqliteHandle,
} from '../sqlite-decision.js';

export type { SqliteHandle, SqliteStatement } from '../sqlite-decision.js';

/** Where the SQLite fence's tables are and how it compares: as the `SqliteFence` options. */
export interface InSqliteFenceOptions {
  /** The mark table (`<table>_op` keeps idempotency keys). Defaults to `leasehold_fence`. */
  readonly table?: string;
  /** `'>='` any number of writes per generation, `'>'` one write per grant. Defaults to `'>='`. */
  readonly policy?: SqliteFencePolicy;
}

/** One fence check inside your SQLite transaction. */
export interface InSqliteFenceRequest {
  /** What the mark protects, e.g. the resource key. */
  readonly scope: string;
  /** The writer's fencing token: a `bigint` or a decimal string, never a JS number. */
  readonly token: bigint | string;
  /** A second check with the same (scope, token, key) answers `duplicate`. */
  readonly idempotencyKey?: string;
}

const decisions = new WeakMap<SqliteHandle, Map<string, SqliteFenceDecision>>();

/** The handle's statements for one table and policy, made (and the tables created) once. */
function decisionFor(db: SqliteHandle, options: InSqliteFenceOptions): SqliteFenceDecision {
  requireObject(options, 'options');
  const table = checkTableName(options.table ?? 'leasehold_fence');
  const policy = checkPolicy(options.policy ?? '>=');
  if (typeof (db as { prepare?: unknown } | null)?.prepare !== 'function')
    throw invalidArgument('db', 'must be a better-sqlite3 Database', db);
  if (!db.inTransaction)
    throw invalidArgument(
      'db',
      'must be inside your transaction (db.transaction(fn).immediate()): the mark commits with it',
      'no transaction open',
    );
  let byName = decisions.get(db);
  if (byName === undefined) decisions.set(db, (byName = new Map<string, SqliteFenceDecision>()));
  const name = `${table} ${policy}`;
  let decision = byName.get(name);
  if (decision === undefined)
    byName.set(name, (decision = new SqliteFenceDecision(db, table, policy)));
  return decision;
}

function checkScope(scope: unknown): string {
  if (typeof scope !== 'string' || scope === '')
    throw invalidArgument('scope', 'must be a non-empty string', scope);
  return scope;
}

/**
 * Fences your own better-sqlite3 transaction: the same decision and tables as `SqliteFence`
 * (the tables are created on first use), taken in the transaction you hold, so the mark
 * commits or rolls back with your write. Call it inside `db.transaction(fn)`, run with
 * `.immediate()` so the write lock is taken at BEGIN.
 *
 * `applied`: keep your write (return normally). `duplicate` / `stale_fence`: throw from `fn`
 * so better-sqlite3 rolls everything back; `stale_fence` is definitive. Throws
 * `ERR_INVALID_ARGUMENT` for a malformed request or outside a transaction.
 *
 * @example
 * const write = db.transaction((body: string) => {
 *   const r = fenceInSqlite(db, { scope: 'report/july', token: lease.token });
 *   if (r.status !== 'applied') throw new Refused(r);
 *   db.prepare('UPDATE report SET body = ? WHERE id = ?').run(body, 'july');
 * });
 * write.immediate(body);
 */
export function fenceInSqlite(
  db: SqliteHandle,
  request: InSqliteFenceRequest,
  options: InSqliteFenceOptions = {},
): FenceResult<undefined> {
  requireObject(request, 'request');
  const scope = checkScope(request.scope);
  const token = parseToken(request.token, 'token');
  const key = request.idempotencyKey;
  if (key !== undefined && (typeof key !== 'string' || key === ''))
    throw invalidArgument('idempotencyKey', 'must be a non-empty string', key);
  // A write with nothing to run: the caller's own statements are the write.
  return decisionFor(db, options).decide(scope, token, key, () => undefined);
}

/**
 * Claim before start in your SQLite transaction: installs `token`'s generation on `scope`
 * with no write (the same rule as `SqliteFence.claim`). `applied` or `stale_fence`.
 */
export function claimInSqlite(
  db: SqliteHandle,
  scope: string,
  token: bigint | string,
  options: InSqliteFenceOptions = {},
): ClaimResult {
  const s = checkScope(scope);
  const t = parseToken(token, 'token');
  const r = decisionFor(db, options).decide(s, t, undefined, undefined);
  return r.status === 'stale_fence' ? r : { status: 'applied' };
}
