import type { LeaseholdError } from './errors.js';

/**
 * What the files of a store folder (`src/stores/<kind>/`) are: one name, one role, in every
 * folder that has it — as every kysely dialect implements `Driver`. A folder's files other
 * than these are its own (queries, keys, epochs, …). test/docs/architecture.test.ts checks
 * each folder against {@link STORE_FOLDERS} and each `errors.ts` against
 * {@link StoreErrorMapper}.
 */
export const STORE_FILE_ROLES = {
  'index.ts': 'the subpath entry (`leasehold/<kind>`): the store class and its options',
  'options.ts': 'the options interface, its defaults and the function that checks them',
  'store.ts': 'the LeaseStore itself (core/store.ts)',
  'errors.ts': 'the error mapper: exports `storeError`, a StoreErrorMapper',
  'notify.ts': 'the watch source: what wakes the waiters of a key when it is released',
  'batch.ts': 'the batch sender: requests that meet go to the store in one call',
} as const;

export type StoreFileRole = keyof typeof STORE_FILE_ROLES;

/**
 * The role files each store folder has. Every folder has `index.ts`, `options.ts` and
 * `store.ts`; a folder without `errors.ts` has no driver errors of its own to map.
 */
export const STORE_FOLDERS: Readonly<Record<string, readonly StoreFileRole[]>> = {
  memory: ['index.ts', 'options.ts', 'store.ts'],
  sqlite: ['index.ts', 'options.ts', 'store.ts', 'errors.ts', 'notify.ts', 'batch.ts'],
  postgres: ['index.ts', 'options.ts', 'store.ts', 'errors.ts', 'notify.ts'],
  redis: ['index.ts', 'options.ts', 'store.ts', 'errors.ts', 'notify.ts', 'batch.ts'],
  etcd: ['index.ts', 'options.ts', 'store.ts', 'errors.ts', 'notify.ts'],
  http: ['index.ts', 'options.ts', 'store.ts', 'errors.ts', 'notify.ts', 'batch.ts'],
};

/**
 * The error mapper every store's `errors.ts` exports as `storeError`: a driver's failure (of
 * operation `op`, where the store names it) as the error the client acts on —
 * `ERR_UNAVAILABLE` for anything the store could not do (the client answers `unavailable`,
 * never `busy`; `ERR_PROTOCOL` for an answer it could not read); a `LeaseholdError` passes
 * through unchanged.
 */
export type StoreErrorMapper = (err: unknown, op: string) => LeaseholdError;
