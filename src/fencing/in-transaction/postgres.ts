import { invalidArgument } from '../../core/errors.js';
import type { ClaimResult, FenceResult } from '../../core/results.js';
import { requireObject } from '../../core/runtime/options.js';
import { checkIdentifier, quoteIdent } from '../../drivers/postgres/identifiers.js';
import { claimParams, writeParams } from '../decision-params.js';
import { decideCall, decisionOf, fenceFunctionNames } from '../postgres-functions.js';

/**
 * Runs one SQL statement inside the caller's open transaction: `text` refers to its
 * parameters as `$1 … $n` (strings or null); the answer is the rows, or anything with a
 * `rows` array (a pg result). The adapters in this module make one from a pg client, a
 * Kysely, Drizzle or Knex transaction; any driver fits.
 */
export type SqlQuery = (text: string, values: readonly (string | null)[]) => PromiseLike<unknown>;

/** Where the fence's tables and functions live, and how it compares: as the `PostgresFence` options. */
export interface InTransactionFenceOptions {
  /** The schema of the fence's tables and functions. Defaults to `public`. */
  readonly schema?: string;
  /** The mark table (its functions are named after it). Defaults to `leasehold_fence`. */
  readonly table?: string;
  /** `'>='` any number of writes per generation, `'>'` one write per grant. Defaults to `'>='`. */
  readonly policy?: '>=' | '>';
  /** The lease table, for requests with `lease`. Defaults to `public.coordination_lease`. */
  readonly leaseTable?: { readonly schema?: string; readonly table?: string };
}

/** One fence check inside the caller's transaction: as `PostgresFence.write`'s request. */
export interface InTransactionFenceRequest {
  /** What the mark protects, e.g. the resource key. Same rules as a lease key. */
  readonly scope: string;
  /** The writer's fencing token: a `bigint` or a decimal string, never a JS number. */
  readonly token: bigint | string;
  /** A second check with the same (scope, token, key) answers `duplicate`. */
  readonly idempotencyKey?: string;
  /**
   * Also require that this lease still holds its key with this token, unexpired by the
   * database clock, and lock its row until the transaction ends (the lease table must be in
   * this database).
   */
  readonly lease?: { readonly key: string; readonly leaseId: string };
}

/**
 * Fences the caller's own transaction: takes the fence's decision in it (the scope's mark
 * row stays locked until that transaction ends) and answers `applied`, `duplicate` or
 * `stale_fence` — the same decision and tables as `PostgresFence`, whose migrations install
 * the function (run `new PostgresFence({...}).migrate()` once).
 *
 * Nothing is committed here: on `applied` commit your transaction and the mark moves with
 * your write; on anything else roll it back (a `stale_fence` is definitive: never retry under
 * the same lease). Rolling back after `applied` leaves the mark where it was. Throws
 * `ERR_INVALID_ARGUMENT` for a malformed request before sending anything; the driver's own
 * error when the statement fails.
 *
 * @example
 * await db.transaction().execute(async (trx) => {
 *   const r = await fenceIn(kyselyQuery(trx), { scope: 'report/july', token: lease.token });
 *   if (r.status !== 'applied') throw new Refused(r); // rolls the transaction back
 *   await trx.updateTable('report').set({ body }).where('id', '=', 'july').execute();
 * });
 */
export async function fenceIn(
  query: SqlQuery,
  request: InTransactionFenceRequest,
  options: InTransactionFenceOptions = {},
): Promise<FenceResult<undefined>> {
  const fence = resolve(options);
  const { params } = writeParams(request, fence.policy, fence.leaseTable);
  checkQuery(query);
  return decisionOf(firstRow(await query(fence.write, params)));
}

/**
 * Claim before start inside the caller's transaction: installs `token`'s generation on
 * `scope` with no write (the same rule as `PostgresFence.claim`), committed with the caller's
 * transaction. `applied` or `stale_fence`.
 */
export async function claimIn(
  query: SqlQuery,
  scope: string,
  token: bigint | string,
  options: InTransactionFenceOptions = {},
): Promise<ClaimResult> {
  const fence = resolve(options);
  const values = claimParams(scope, token, fence.policy, fence.leaseTable);
  checkQuery(query);
  const decided = decisionOf(firstRow(await query(fence.claim, values)));
  return decided.status === 'applied' ? { status: 'applied' } : (decided as ClaimResult);
}

interface ResolvedFence {
  readonly write: string;
  readonly claim: string;
  readonly policy: '>=' | '>';
  readonly leaseTable: string;
}

function resolve(options: InTransactionFenceOptions): ResolvedFence {
  requireObject(options, 'options');
  const schema = checkIdentifier('schema', options.schema ?? 'public');
  const table = checkIdentifier('table', options.table ?? 'leasehold_fence');
  const policy = options.policy ?? '>=';
  if (policy !== '>=' && policy !== '>') {
    throw invalidArgument('policy', "must be '>=' or '>'", policy);
  }
  const lt = options.leaseTable;
  const leaseSchema = checkIdentifier('leaseTable.schema', lt?.schema ?? 'public');
  const leaseTable = checkIdentifier('leaseTable.table', lt?.table ?? 'coordination_lease');
  const names = fenceFunctionNames(schema, table);
  return {
    write: decideCall(names, false),
    claim: decideCall(names, true),
    policy,
    leaseTable: `${quoteIdent(leaseSchema)}.${quoteIdent(leaseTable)}`,
  };
}

function checkQuery(query: unknown): void {
  if (typeof query !== 'function') {
    throw invalidArgument('query', 'must be a function (text, values) => rows', query);
  }
}

/** The first row of an answer: rows as an array (postgres.js, Kysely) or a pg result. */
function firstRow(answer: unknown): unknown {
  if (Array.isArray(answer)) return answer[0];
  const rows = (answer as { rows?: unknown } | null | undefined)?.rows;
  return Array.isArray(rows) ? rows[0] : undefined;
}
