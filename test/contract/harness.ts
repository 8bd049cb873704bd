// The harness type of the kit in `leasehold/testing` (src/testing/store-contract/), named
// here for the suite's own harnesses; every harness of test/ gives a teardown.
import type { StoreHarness as KitStoreHarness } from '../../src/testing/store-contract/harness.js';

export type {
  CaseContext,
  StoreContractCase as ContractCase,
} from '../../src/testing/store-contract/harness.js';

/** A harness of this suite: the kit's, with a teardown that always exists. */
export interface StoreHarness extends KitStoreHarness {
  teardown(): Promise<void>;
}
