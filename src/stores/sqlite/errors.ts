import { LeaseholdError } from '../../core/errors.js';

/**
 * A driver error as the store reports it: `ERR_UNAVAILABLE` with the driver's error as the
 * cause (the client answers `unavailable`); a `LeaseholdError` passes through unchanged.
 */
export function storeError(err: unknown): LeaseholdError {
  return err instanceof LeaseholdError
    ? err
    : new LeaseholdError('ERR_UNAVAILABLE', `SQLite lease store: ${String(err)}`, { cause: err });
}

/** The file could not be opened or migrated. */
export function openError(absolutePath: string, err: unknown): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `cannot open SQLite lease store at ${absolutePath}: ${String(err)}`,
    { cause: err },
  );
}

/** No token is left for `key` below the int64 limit. */
export function exhaustedError(key: string): LeaseholdError {
  return new LeaseholdError('ERR_UNAVAILABLE', `token space of ${key} is exhausted`);
}

/** Other processes kept winning `key` between this store's read and its write. */
export function contentionError(key: string): LeaseholdError {
  return new LeaseholdError('ERR_UNAVAILABLE', `contention on ${key} did not settle`);
}

/** The store was closed before or while the request ran. */
export function closedError(): LeaseholdError {
  return new LeaseholdError('ERR_CLOSED', 'the SQLite lease store was closed');
}
