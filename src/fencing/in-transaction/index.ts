/**
 * `leasehold/fencing/in-transaction`: the fence inside your own transaction, from any
 * driver or query builder. No driver is loaded by this entry point: each adapter is written
 * against the few methods it calls.
 */
export {
  claimIn,
  fenceIn,
  type InTransactionFenceOptions,
  type InTransactionFenceRequest,
  type SqlQuery,
} from './postgres.js';
export {
  drizzleQuery,
  knexQuery,
  kyselyQuery,
  pgQuery,
  type DrizzleExecutor,
  type KnexExecutor,
  type KyselyExecutor,
  type PgQueryable,
} from './adapters.js';
export {
  claimInSqlite,
  fenceInSqlite,
  type InSqliteFenceOptions,
  type InSqliteFenceRequest,
  type SqliteHandle,
  type SqliteStatement,
} from './sqlite.js';
export type { ClaimResult, FenceResult } from '../../core/results.js';
