import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StoreAcquireRequest, StoreAcquireResult } from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import {
  runStoreContract,
  storeContractCases,
  type StoreHarness,
} from '../../src/testing/store-contract/index.js';

// The store contract as a third party runs it, through the kit's in-process runner: the memory
// store passes (skips only where it lacks a capability, each with its reason), and a planted
// broken store is reported failing. test/testing/contract-sensitivity.test.ts plants one break
// per rule, case by case.

/** Grants every acquisition token 1: tokens never increase. */
class RepeatsTokens extends MemoryLeaseStore {
  constructor(private readonly s: MemoryLeaseState) {
    super({ state: s });
  }
  override async tryAcquire(r: StoreAcquireRequest): Promise<StoreAcquireResult> {
    const answer = await super.tryAcquire(r);
    if (answer.status !== 'acquired') return answer;
    this.s.rows.get(r.key)!.lastToken = 1n;
    return { status: 'acquired', token: 1n };
  }
}

const harness = (name: string, open: (s: MemoryLeaseState) => MemoryLeaseStore) => {
  const state = new MemoryLeaseState();
  return { name, open: () => open(state) } satisfies StoreHarness;
};

describe('storeContract run in-process (runStoreContract)', () => {
  it('reports every case of a correct store passed or skipped with a reason', async () => {
    const outcomes = await runStoreContract(
      harness('memory', (state) => new MemoryLeaseStore({ state })),
    );
    assert.deepEqual(
      outcomes.map((o) => o.name),
      storeContractCases.map((c) => c.name),
    );
    for (const o of outcomes) {
      assert.notEqual(
        o.status,
        'failed',
        `${o.name}: ${o.status === 'failed' ? String(o.error) : ''}`,
      );
      if (o.status === 'skipped') assert.match(o.reason, /^memory /);
    }
  });

  it('reports a store whose tokens never increase as failing the token cases', async () => {
    const outcomes = await runStoreContract(harness('broken', (s) => new RepeatsTokens(s)));
    const failed = outcomes.filter((o) => o.status === 'failed').map((o) => o.name);
    for (const fragment of [
      'release is conditional on lease id and token, and keeps the token counter',
      'tokens strictly increase and holders never overlap',
      'tokens keep increasing across a store re-open',
    ])
      assert.ok(
        failed.some((n) => n.startsWith(fragment)),
        `"${fragment}" did not fail: failed ${JSON.stringify(failed)}`,
      );
  });
});
