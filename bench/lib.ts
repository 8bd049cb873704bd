// Local copy of the benchmark API (bench-api.md) until main has bench/lib.ts; the lead
// reconciles this file with main's.

/** How long and how thoroughly to measure. */
export interface BenchOptions {
  /** Per measurement, default 3000. */
  readonly durationMs: number;
  readonly quick: boolean;
}

/** One row of the benchmark table. */
export interface BenchResult {
  readonly suite: string;
  readonly subject: string;
  readonly scenario: string;
  readonly workers: number;
  readonly keys: 'hot' | 'distinct' | 'n/a';
  readonly cyclesPerSec?: number;
  readonly p50Ms?: number;
  readonly p99Ms?: number;
  readonly cpuMsPer1000?: number;
  readonly notes?: string;
}
