import {
  DEFAULT_CASE_TIMEOUT_MS,
  nodeTestRunner,
  runKitCases,
  type KitCaseOutcome,
  type KitRunner,
} from '../kit/runner.js';
import { availabilityCases } from './cases/availability.js';
import { batchCases } from './cases/batches.js';
import { grantCases } from './cases/grants.js';
import { handOffCases } from './cases/hand-off.js';
import { lockDelayCases } from './cases/lock-delay.js';
import { multiKeyCases } from './cases/multi-key.js';
import { renewReleaseCases } from './cases/renew-release.js';
import { semaphoreCases } from './cases/semaphores.js';
import { tokenCases } from './cases/tokens.js';
import { valueCases } from './cases/values-and-inputs.js';
import { waitingCases } from './cases/waiting.js';
import type { StoreContractCase, StoreHarness } from './harness.js';

export type { CaseContext, StoreContractCase, StoreHarness } from './harness.js';

/**
 * Every case of the lease contract (DESIGN §2), in the order the suite runs them: what every
 * `LeaseStore` must do, checked through the real `LeaseClient` and the store's own methods.
 */
export const storeContractCases: readonly StoreContractCase[] = Object.freeze([
  ...grantCases,
  ...renewReleaseCases,
  ...tokenCases,
  ...waitingCases,
  ...valueCases,
  ...handOffCases,
  ...semaphoreCases,
  ...lockDelayCases,
  ...multiKeyCases,
  ...batchCases,
  ...availabilityCases,
]);

/** Options for {@link storeContract}. */
export interface StoreContractOptions {
  /** Where the cases are registered. Defaults to {@link nodeTestRunner}. */
  readonly runner?: KitRunner;
  /** Runs only the cases this returns true for. Defaults to all. */
  readonly filter?: (c: StoreContractCase) => boolean;
}

/**
 * Registers the lease contract's cases for one store with a test runner: one `describe`
 * named after the harness, one test per case. Before the cases it opens and closes one store,
 * so an unreachable store fails the run instead of being skipped; after them it calls the
 * harness's `teardown`. Cases that check a capability the store does not declare (hand-off,
 * batch renewal, token blocks) show as skipped with the reason.
 *
 * @example
 * // my-store.test.ts, run with `node --test`
 * import { storeContract } from 'leasehold/testing';
 * storeContract({ name: 'my-store', open: () => new MyLeaseStore(connectionString) });
 */
export function storeContract(harness: StoreHarness, options: StoreContractOptions = {}): void {
  const runner = options.runner ?? nodeTestRunner();
  const cases = storeContractCases.filter(options.filter ?? (() => true));
  runner.describe(`LeaseStore contract: ${harness.name}`, () => {
    runner.before(async () => {
      // Fail, never skip, when the store is unreachable.
      const probe = await harness.open();
      await probe.close();
    });
    runner.after(async () => {
      await harness.teardown?.();
    });
    for (const c of cases) {
      runner.it(c.name, c.timeoutMs ?? DEFAULT_CASE_TIMEOUT_MS, (t) => c.run(harness, t));
    }
  });
}

/**
 * Runs the lease contract against one store in this process, without a test runner, and
 * answers what became of each case (the harness's `teardown` is not called). For scripts, and
 * for tests asserting that a store breaks the contract.
 */
export function runStoreContract(
  harness: StoreHarness,
  cases: readonly StoreContractCase[] = storeContractCases,
): Promise<KitCaseOutcome[]> {
  return runKitCases(cases, harness);
}
