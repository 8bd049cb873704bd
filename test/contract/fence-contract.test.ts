import { fenceContract } from '../../src/testing/fence-contract/index.js';
import { FENCE_HARNESSES, selectedFences } from './fences/index.js';

// Our own fences run the fence contract through the kit `leasehold/testing` exports.
for (const name of selectedFences()) fenceContract(FENCE_HARNESSES[name]!());
