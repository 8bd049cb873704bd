import { MemoryLeaseState, MemoryLeaseStore } from '../../../src/stores/memory/store.js';
import type { StoreHarness } from '../harness.js';

export function memoryHarness(): StoreHarness {
  const state = new MemoryLeaseState();
  return {
    name: 'memory',
    open: () => Promise.resolve(new MemoryLeaseStore({ state })),
    teardown: () => Promise.resolve(),
  };
}
