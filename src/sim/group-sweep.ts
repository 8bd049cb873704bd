import type { InvariantId } from '../check/checker.js';
import { runGroupSeed, type GroupWorkload } from './group-workloads.js';
import type { GroupBug } from './planted-bugs.js';

/** Figures of a sweep of one group workload. */
export interface GroupSweepResult {
  readonly workload: GroupWorkload;
  readonly runs: number;
  readonly grants: number;
  /** Slots taken, sets held whole, or lock-delays started by an expiry. */
  readonly holds: number;
  readonly staleWritesRejected: number;
  readonly staleWritesAccepted: number;
  /** Seeds in which each invariant was violated (a planted bug shows here). */
  readonly violatedSeeds: Readonly<Partial<Record<InvariantId, number>>>;
  /** Seeds I5 could not decide within its search budget. */
  readonly i5Unknown: number;
  readonly failures: readonly { readonly seed: number; readonly invariants: string[] }[];
  readonly wallMs: number;
}

/**
 * Runs one group workload (semaphore, sets, lock-delay) over `count` seeds from `from` and
 * adds up the figures; a seed that breaks a safety invariant is a failure.
 */
export async function sweepGroupSeeds(options: {
  readonly workload: GroupWorkload;
  readonly from?: number;
  readonly count: number;
  readonly bug?: GroupBug;
  readonly timeLimitMs?: number;
  readonly onProgress?: (done: number) => void;
}): Promise<GroupSweepResult> {
  const started = performance.now();
  const from = options.from ?? 1;
  const sum = { runs: 0, grants: 0, holds: 0, staleWritesRejected: 0, staleWritesAccepted: 0 };
  const violatedSeeds: Partial<Record<InvariantId, number>> = {};
  const failures: { seed: number; invariants: string[] }[] = [];
  let i5Unknown = 0;
  for (let seed = from; seed < from + options.count; seed++) {
    if (options.timeLimitMs !== undefined && performance.now() - started > options.timeLimitMs)
      break;
    const run = await runGroupSeed({
      workload: options.workload,
      seed,
      ...(options.bug ? { bug: options.bug } : {}),
    });
    const f = run.report.figures;
    sum.runs++;
    sum.grants += f.grants;
    sum.holds += run.holds;
    sum.staleWritesRejected += f.staleWritesRejected;
    sum.staleWritesAccepted += f.staleWritesAccepted;
    if (run.report.invariants.I5.status === 'unknown') i5Unknown++;
    const broken = (Object.entries(run.report.invariants) as [InvariantId, { status: string }][])
      .filter(([, r]) => r.status === 'violated')
      .map(([id]) => id);
    for (const id of broken) violatedSeeds[id] = (violatedSeeds[id] ?? 0) + 1;
    if (!run.report.valid) failures.push({ seed, invariants: broken });
    if (options.onProgress && sum.runs % 1000 === 0) options.onProgress(sum.runs);
  }
  return {
    workload: options.workload,
    ...sum,
    violatedSeeds,
    i5Unknown,
    failures,
    wallMs: performance.now() - started,
  };
}

/** The figures line of a group sweep. */
export function formatGroupSweep(label: string, r: GroupSweepResult): string {
  const holds = { semaphore: 'slots_taken', sets: 'sets_held', 'lock-delay': 'delayed_expiries' };
  const violated = Object.entries(r.violatedSeeds)
    .map(([id, n]) => `${id}:${n}`)
    .join(',');
  return `${label}: runs=${r.runs} grants=${r.grants} ${holds[r.workload]}=${r.holds} stale_writes_rejected=${r.staleWritesRejected} stale_writes_accepted=${r.staleWritesAccepted} i5_unknown=${r.i5Unknown} violated_seeds=${violated || 'none'} failing_seeds=${r.failures.length} wall=${Math.round(r.wallMs)}ms`;
}

/** The command that replays one seed of a group workload. */
export function groupReplayCommand(workload: GroupWorkload, seed: number, bug?: GroupBug): string {
  return `node build/src/cli/main.js sim sweep --workload ${workload} --from ${seed} --seeds 1${bug ? ` --bug ${bug}` : ''}`;
}
