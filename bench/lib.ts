/**
 * The benchmark interfaces (bench-api). The lead's bench/lib.ts on main is the reference;
 * this local copy lets this branch build until the two are reconciled.
 */
export interface BenchOptions {
  /** Per measurement, default 3000. */
  readonly durationMs: number;
  readonly quick: boolean;
}

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
