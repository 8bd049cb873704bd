import {
  DEFAULT_CASE_TIMEOUT_MS,
  nodeTestRunner,
  runKitCases,
  type KitCaseOutcome,
  type KitRunner,
} from '../kit/runner.js';
import { badTokenCases } from './cases/bad-tokens.js';
import { claimCases } from './cases/claims.js';
import { concurrencyCases } from './cases/concurrency.js';
import { durabilityCases } from './cases/durability.js';
import { policyCases } from './cases/policies.js';
import type { FenceContractCase, FenceHarness } from './harness.js';

export type {
  FenceContractCase,
  FenceFeature,
  FenceHarness,
  FencePolicy,
  FenceUnderTest,
  FenceWriteOutcome,
} from './harness.js';

/**
 * Every case of the fence contract (DESIGN §4): what every fence must do, checked through
 * its answers and the resource's own data.
 */
export const fenceContractCases: readonly FenceContractCase[] = Object.freeze([
  ...policyCases,
  ...claimCases,
  ...durabilityCases,
  ...concurrencyCases,
  ...badTokenCases,
]);

/** Options for {@link fenceContract}. */
export interface FenceContractOptions {
  /** Where the cases are registered. Defaults to {@link nodeTestRunner}. */
  readonly runner?: KitRunner;
  /** Runs only the cases this returns true for. Defaults to all. */
  readonly filter?: (c: FenceContractCase) => boolean;
}

/**
 * Registers the fence contract's cases for one fence with a test runner: one `describe`
 * named after the harness, one test per case. Before the cases it opens and closes one
 * instance, so an unreachable resource fails the run instead of being skipped; after them it
 * calls the harness's `teardown`. Cases needing a feature the harness `lacks` show as skipped
 * with its reason.
 *
 * @example
 * // json-file-fence.test.ts, run with `node --test`
 * import { fenceContract } from 'leasehold/testing';
 * fenceContract({ name: 'json-file', open: (policy) => openMyFence(path, policy) });
 */
export function fenceContract(harness: FenceHarness, options: FenceContractOptions = {}): void {
  const runner = options.runner ?? nodeTestRunner();
  const cases = fenceContractCases.filter(options.filter ?? (() => true));
  runner.describe(`fence contract: ${harness.name}`, () => {
    runner.before(async () => {
      const probe = await harness.open('>=');
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
 * Runs the fence contract against one fence in this process, without a test runner, and
 * answers what became of each case (the harness's `teardown` is not called). For scripts, and
 * for tests asserting that a fence breaks the contract.
 */
export function runFenceContract(
  harness: FenceHarness,
  cases: readonly FenceContractCase[] = fenceContractCases,
): Promise<KitCaseOutcome[]> {
  return runKitCases(cases, harness);
}
