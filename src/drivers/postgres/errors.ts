import { LeaseholdError } from '../../core/errors.js';
import { networkCause } from '../../core/runtime/network-errors.js';

/** Postgres error codes that mean "the schema is not there": a missing migration, not an outage. */
const MISSING_SCHEMA = new Set(['42P01', '3F000', '42883']);

/** The SQLSTATE of a pg error, if any. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Wraps a driver error as `ERR_UNAVAILABLE` (the client turns that into `unavailable`,
 * never `busy`). LeaseholdErrors pass through. A host name that cannot be resolved (a
 * mistyped URL such as `postgres://base`) is said in words, naming the host.
 */
export function unavailable(what: string, err: unknown): LeaseholdError {
  if (err instanceof LeaseholdError) return err;
  const cause = networkCause(err);
  if (cause !== undefined && /^E(NOTFOUND|AI_)/.test(cause.code)) {
    const message = err instanceof Error ? err.message : String(err);
    return new LeaseholdError('ERR_UNAVAILABLE', `${what}: ${cause.words} (${message})`, {
      cause: err,
    });
  }
  const state = sqlState(err);
  const hint =
    state !== undefined && MISSING_SCHEMA.has(state)
      ? ' (is the schema migrated? call migrate() or run `leasehold migrate`)'
      : '';
  const message = err instanceof Error ? err.message : String(err);
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `${what}: ${message}${state ? ` [${state}]` : ''}${hint}`,
    {
      cause: err,
    },
  );
}
