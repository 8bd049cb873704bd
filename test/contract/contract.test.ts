import { storeContract } from '../../src/testing/store-contract/index.js';
import { HARNESSES, selectedHarnesses } from './harnesses/index.js';

// Our own stores run the lease contract through the kit `leasehold/testing` exports, so the
// suite and the kit are one source.
for (const name of selectedHarnesses()) storeContract(HARNESSES[name]!());
