import type { LeaseStore } from '../../src/core/store.js';

/**
 * How the conformance suite reaches one kind of store. Every `open()` returns a new store
 * instance (a new connection) over the same backing data, so cases can model several
 * processes and a store re-open.
 */
export interface StoreHarness {
  readonly name: string;
  /** Throws (and so fails the run) when the selected store is unreachable. */
  open(): Promise<LeaseStore>;
  /** Frees what the harness itself holds (temporary files, admin connections). */
  teardown(): Promise<void>;
}

/** One behaviour every store must show. `run` rejects when the store breaks the contract. */
export interface ContractCase {
  readonly name: string;
  /** Longest time the case may take on a loaded machine. */
  readonly timeoutMs?: number;
  run(harness: StoreHarness): Promise<void>;
}
