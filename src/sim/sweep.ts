import { formatFigures, type CheckReport, type InvariantStatus } from '../check/checker.js';
import type { PlantedBug } from './planted-bugs.js';
import { runRandomSeed } from './random-workload.js';

/** Options for {@link sweepSeeds}. */
export interface SweepOptions {
  /** First seed. Defaults to 1. */
  readonly from?: number;
  readonly count: number;
  readonly fencing: boolean;
  readonly bug?: PlantedBug;
  /** Every seed fails over (the `failover` workload); see the random workload's `failover` option. */
  readonly failover?: boolean;
  /** Stop at the first failing seed. Defaults to false. */
  readonly stopOnFailure?: boolean;
  /** Stop (bounded run) after this much wall time; the result says how many seeds ran. */
  readonly timeLimitMs?: number;
  /** Called every `progressEvery` seeds. */
  readonly onProgress?: (done: number) => void;
  readonly progressEvery?: number;
}

/** Aggregated figures of many simulated runs. */
export interface SweepResult {
  readonly runs: number;
  readonly failures: readonly {
    readonly seed: number;
    readonly report: CheckReport;
    readonly faults: readonly string[];
  }[];
  /** Runs in which a stale write was accepted or an acknowledged write was lost (control-arm sensitivity). */
  readonly anomalousRuns: number;
  readonly grants: number;
  /** Grants made by a hand-off (`releaseAndAcquire`). */
  readonly handOffs: number;
  /** Acquisitions answered by local succession (decision 007). */
  readonly localSuccessions: number;
  readonly fencedWritesAttempted: number;
  readonly unfencedWritesAttempted: number;
  readonly staleWritesRejected: number;
  readonly staleWritesAccepted: number;
  readonly lostAcknowledgedWrites: number;
  readonly i3Overlaps: number;
  readonly takeoverMs: readonly number[];
  /** How many runs I5 (linearizability of store operations) judged ok, unknown (budget) … */
  readonly i5: Readonly<Record<InvariantStatus, number>>;
  /** The seeds I5 could not decide within its search budget, with the checker's note. */
  readonly i5Unknown: readonly { readonly seed: number; readonly note: string }[];
  /** With failovers: grants of a token the store had granted before, and the runs with any. */
  readonly reissuedTokens: number;
  readonly reissuingRuns: number;
  readonly epochRaises: number;
  readonly wallMs: number;
}

/**
 * Runs the random workload over a range of seeds and adds up the figures. A seed that breaks
 * a safety invariant is a failure (kept with its report); replay it with {@link replayCommand}.
 */
export async function sweepSeeds(options: SweepOptions): Promise<SweepResult> {
  const from = options.from ?? 1;
  const started = performance.now();
  const failures: { seed: number; report: CheckReport; faults: readonly string[] }[] = [];
  const takeover: number[] = [];
  const i5Unknown: { seed: number; note: string }[] = [];
  let runs = 0;
  let anomalous = 0;
  const reissue = { reissuedTokens: 0, reissuingRuns: 0, epochRaises: 0 };
  const i5: Record<InvariantStatus, number> = {
    ok: 0,
    violated: 0,
    expected: 0,
    not_checked: 0,
    unknown: 0,
  };
  const sum = {
    grants: 0,
    handOffs: 0,
    localSuccessions: 0,
    fencedWritesAttempted: 0,
    unfencedWritesAttempted: 0,
    staleWritesRejected: 0,
    staleWritesAccepted: 0,
    lostAcknowledgedWrites: 0,
    i3Overlaps: 0,
  };
  for (let seed = from; seed < from + options.count; seed++) {
    if (options.timeLimitMs !== undefined && performance.now() - started > options.timeLimitMs)
      break;
    const run = await runRandomSeed({
      seed,
      fencing: options.fencing,
      ...(options.bug ? { bug: options.bug } : {}),
      ...(options.failover === true ? { failover: true } : {}),
    });
    runs++;
    reissue.reissuedTokens += run.reissuedTokens;
    reissue.epochRaises += run.epochRaises;
    if (run.reissuedTokens > 0) reissue.reissuingRuns++;
    const f = run.report.figures;
    for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += f[k];
    for (const x of f.takeoverMs) takeover.push(x);
    const i5Report = run.report.invariants.I5;
    i5[i5Report.status]++;
    if (i5Report.status === 'unknown') i5Unknown.push({ seed, note: i5Report.note ?? '' });
    if (f.staleWritesAccepted > 0 || f.lostAcknowledgedWrites > 0) anomalous++;
    if (!run.report.valid) {
      failures.push({ seed, report: run.report, faults: run.faults });
      if (options.stopOnFailure === true) break;
    }
    if (options.onProgress && runs % (options.progressEvery ?? 1000) === 0)
      options.onProgress(runs);
  }
  return {
    runs,
    failures,
    anomalousRuns: anomalous,
    ...sum,
    takeoverMs: takeover,
    i5,
    i5Unknown,
    ...reissue,
    wallMs: performance.now() - started,
  };
}

/** The figures line every run prints (VERIFICATION.md), plus the sweep's own counts. */
export function formatSweep(label: string, r: SweepResult): string {
  return `${label}: ${formatFigures({ ...r })} unfenced_writes_attempted=${r.unfencedWritesAttempted} lost_acknowledged_writes=${r.lostAcknowledgedWrites} anomalous_runs=${r.anomalousRuns} i5_ok=${r.i5.ok} i5_unknown=${r.i5.unknown} failing_seeds=${r.failures.length} wall=${Math.round(r.wallMs)}ms`;
}

/** The failover counts of a sweep whose seeds fail over. */
export function formatFailoverFigures(r: SweepResult): string {
  return `reissued_tokens=${r.reissuedTokens} reissuing_runs=${r.reissuingRuns} epoch_raises=${r.epochRaises}`;
}

/** The command that replays one seed exactly. */
export function replayCommand(
  seed: number,
  options: { fencing: boolean; bug?: PlantedBug; failover?: boolean },
): string {
  return `node build/src/cli/main.js sim run --seed ${seed}${options.fencing ? '' : ' --no-fencing'}${options.failover === true ? ' --failover' : ''}${options.bug ? ` --bug ${options.bug}` : ''}`;
}
