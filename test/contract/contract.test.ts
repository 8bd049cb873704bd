import { after, before, describe, it } from 'node:test';
import type { StoreHarness } from './harness.js';
import { contractCases } from './cases.js';
import { HARNESSES, selectedHarnesses } from './harnesses/index.js';

for (const name of selectedHarnesses()) {
  describe(`LeaseStore contract: ${name}`, () => {
    let harness: StoreHarness;
    before(async () => {
      harness = HARNESSES[name]!();
      // Fail, never skip, when the selected store is unreachable.
      const probe = await harness.open();
      await probe.close();
    });
    after(async () => {
      await harness?.teardown();
    });
    for (const c of contractCases) {
      it(c.name, { timeout: c.timeoutMs ?? 30_000 }, (t) => c.run(harness, t));
    }
  });
}
