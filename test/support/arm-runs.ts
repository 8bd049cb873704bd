import assert from 'node:assert/strict';
import type { CheckReport } from '../../src/check/checker.js';
import type { FaultRun, FaultStore } from './fault-env.js';
import { tempDir } from './tmp.js';

/** One run of one arm of a fault test. */
export interface ArmRun {
  /** The run's number within its arm, from 0. */
  readonly i: number;
  /** True in the fenced arm, false in the unfenced control arm. */
  readonly fencing: boolean;
  /** A directory of the run's own (the resource's files), removed after the run. */
  readonly dir: string;
  /** `run 3 fenced`: the start of the run's assertion messages. */
  readonly label: string;
}

/**
 * Runs `body` `runs` times in each arm — fenced, then unfenced, in turn — each in a temp
 * directory of its own that is removed afterwards, also when `body` throws.
 */
export async function eachArmRun(
  runs: number,
  tag: string,
  body: (run: ArmRun) => Promise<void>,
): Promise<void> {
  for (let i = 0; i < runs; i++) {
    for (const fencing of [true, false]) {
      const tmp = tempDir(tag);
      try {
        await body({
          i,
          fencing,
          dir: tmp.dir,
          label: `run ${i} ${fencing ? 'fenced' : 'unfenced'}`,
        });
      } finally {
        tmp.remove();
      }
    }
  }
}

/**
 * {@link eachArmRun} with a fresh run of `store` for each (its own namespace at the store and a
 * proxy per worker), closed after the body.
 */
export async function eachStoreArmRun(
  store: FaultStore,
  runs: number,
  tag: string,
  body: (run: ArmRun, storeRun: FaultRun) => Promise<void>,
): Promise<void> {
  await eachArmRun(runs, tag, async (arm) => {
    const storeRun = await store.run(arm.dir);
    try {
      await body(arm, storeRun);
    } finally {
      await storeRun.close();
    }
  });
}

/**
 * The invariants every two-holder story must keep in both arms: I2, I3, I5 and I7 `ok`, and
 * I4 `ok` where the store states its own expiry (where only the client observes it, etcd,
 * the history says so and I4 has nothing to compare with: `not_checked`).
 */
export function assertStoryInvariants(
  report: CheckReport,
  store: Pick<FaultStore, 'expiryObservedByClient'>,
  where: string,
): void {
  for (const inv of ['I2', 'I3', 'I5', 'I7'] as const)
    assert.equal(report.invariants[inv].status, 'ok', `${inv}\n${where}`);
  assert.equal(
    report.invariants.I4.status,
    store.expiryObservedByClient ? 'not_checked' : 'ok',
    `I4\n${where}`,
  );
}
