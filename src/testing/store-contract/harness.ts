import type { LeaseStore } from '../../core/store.js';
import type { KitCase, KitCaseContext } from '../kit/runner.js';

/**
 * How the store contract reaches one kind of store. Every `open()` returns a new store
 * instance (a new connection) over the same backing data, so cases can model several
 * processes and a store re-open. `close()` on a returned store must free it.
 *
 * @example
 * const harness: StoreHarness = { name: 'map', open: () => new MapLeaseStore(shared) };
 */
export interface StoreHarness {
  readonly name: string;
  /** Throws (and so fails the run) when the store is unreachable. */
  open(): Promise<LeaseStore> | LeaseStore;
  /** Frees what the harness itself holds (temporary files, admin connections). Defaults to nothing. */
  teardown?(): Promise<void> | void;
}

/**
 * What a case needs of its test: it calls `skip(reason)` (and returns) when the store lacks
 * the capability the case checks, so a store without it shows a visible skip, never a
 * silent pass.
 */
export type CaseContext = KitCaseContext;

/** One behaviour every store must show. `run` rejects when the store breaks the contract. */
export type StoreContractCase = KitCase<StoreHarness>;
