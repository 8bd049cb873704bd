// Local copy of the benchmark API from /work/briefs/bench-api.md; the lead's bench/lib.ts on
// main replaces this file when the branches are merged.

/** Options every benchmark module receives. */
export interface BenchOptions {
  /** Per measurement, default 3000. */
  readonly durationMs: number;
  readonly quick: boolean;
}

/** One measured row. */
export interface BenchResult {
  readonly suite: string;
  readonly subject: string;
  readonly scenario: string;
  readonly workers: number;
  readonly keys: 'hot' | 'distinct' | 'n/a';
  readonly cyclesPerSec?: number;
  readonly p50Ms?: number;
  readonly p99Ms?: number;
  /** Client process CPU (process.cpuUsage) per 1000 cycles. */
  readonly cpuMsPer1000?: number;
  readonly notes?: string;
}
