import type { TestContext } from 'node:test';
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

/**
 * What a case needs of its test: node:test's context, whose `skip(reason)` marks the case
 * skipped in the report. A case calls it (and returns) when the store lacks the capability
 * the case checks, so a store without it shows a visible skip, never a silent pass.
 */
export type CaseContext = Pick<TestContext, 'skip'>;

/** One behaviour every store must show. `run` rejects when the store breaks the contract. */
export interface ContractCase {
  readonly name: string;
  /** Longest time the case may take on a loaded machine. */
  readonly timeoutMs?: number;
  run(harness: StoreHarness, t: CaseContext): Promise<void>;
}
