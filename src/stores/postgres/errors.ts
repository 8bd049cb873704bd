import type { LeaseholdError } from '../../core/errors.js';
import { unavailable } from '../../drivers/postgres/errors.js';

/**
 * The store's error mapper (`StoreErrorMapper`, core/store-folder.ts): a driver error as
 * `ERR_UNAVAILABLE` (the client answers `unavailable`), through the Postgres foundation's own
 * mapping (drivers/postgres/errors.ts); a `LeaseholdError` passes through unchanged.
 */
export function storeError(err: unknown): LeaseholdError {
  return unavailable('PostgreSQL lease store', err);
}
