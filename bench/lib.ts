/** Shared shapes and measurement helpers for `npm run bench`. */

export interface BenchOptions {
  /** Length of each throughput measurement. */
  readonly durationMs: number;
  /** A shorter run for smoke checks (`npm run bench -- --quick`). */
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
  /** Client process CPU (user + system) per 1,000 cycles. */
  readonly cpuMsPer1000?: number;
  /** Server process CPU per 1,000 cycles, for subjects behind a server in another process. */
  readonly serverCpuMsPer1000?: number;
  /**
   * Median over interleaved rounds of this row's cycles/s (and client CPU per cycle) divided
   * by the raw baseline's in the same round, where the suite measured that way; the table
   * then shows it instead of the ratio of the medians.
   */
  readonly ratioToRaw?: number;
  readonly cpuRatioToRaw?: number;
  readonly notes?: string;
}

/** The p-th percentile (0–100) of `values` (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/**
 * Runs `workers` concurrent loops of `cycle(workerIndex)` for `durationMs`, and reports
 * cycles per second, per-cycle latency p50/p99 and client CPU per 1,000 cycles.
 */
export async function measureCycles(
  workers: number,
  durationMs: number,
  cycle: (worker: number) => Promise<void>,
): Promise<{
  cyclesPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPer1000: number;
  cycles: number;
}> {
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (performance.now() < end) {
        const t = performance.now();
        await cycle(w);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const cycles = latencies.length;
  return {
    cycles,
    cyclesPerSec: (cycles / elapsed) * 1000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    cpuMsPer1000: ((cpu.user + cpu.system) / 1000 / Math.max(1, cycles)) * 1000,
  };
}

/** Formats a number for the table. */
export function fmt(n: number | undefined, digits = 1): string {
  if (n === undefined || Number.isNaN(n)) return '–';
  if (n >= 1000) return Math.round(n).toLocaleString('en-US');
  return n.toFixed(digits);
}
