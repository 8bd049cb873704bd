import { join } from 'node:path';
import { formatFigures, percentile, type HistoryFigures } from '../../src/sim/checker.js';

/** True under `npm run chaos`: longer, more runs. */
export const CHAOS = process.env.LEASEHOLD_CHAOS === '1';

/** Runs per arm: short in CI, long under chaos. */
export function runsPerArm(ci: number, chaos: number): number {
  return CHAOS ? chaos : ci;
}

/**
 * The stores the real-process fault suite runs on, by URL. `LEASEHOLD_FAULT_STORES` selects
 * them (comma-separated; default `sqlite`). A networked store is added here with the URL of a
 * throwaway server (and `src/sim/real/store-url.ts` taught its scheme).
 */
export function faultStores(): { name: string; url: (dir: string) => string }[] {
  const names = (process.env.LEASEHOLD_FAULT_STORES ?? 'sqlite')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return names.map((name) => {
    switch (name) {
      case 'sqlite':
        return { name, url: (dir: string) => `sqlite:${join(dir, 'leases.db')}` };
      default:
        throw new Error(`LEASEHOLD_FAULT_STORES: no fault harness for store "${name}" yet`);
    }
  });
}

/** Adds up figures over runs and prints them in the one format every run uses. */
export class FigureTally {
  runs = 0;
  grants = 0;
  fencedWritesAttempted = 0;
  staleWritesRejected = 0;
  staleWritesAccepted = 0;
  i3Overlaps = 0;
  readonly takeoverMs: number[] = [];

  add(f: HistoryFigures): void {
    this.runs++;
    this.grants += f.grants;
    this.fencedWritesAttempted += f.fencedWritesAttempted;
    this.staleWritesRejected += f.staleWritesRejected;
    this.staleWritesAccepted += f.staleWritesAccepted;
    this.i3Overlaps += f.i3Overlaps;
    this.takeoverMs.push(...f.takeoverMs);
  }

  line(label: string): string {
    return `${label}: ${formatFigures(this)}`;
  }

  p99(): number | undefined {
    return percentile(this.takeoverMs, 99);
  }
}

/** Upper bound for one fault test: generous on a loaded machine, longer under chaos. */
export const FAULT_TIMEOUT_MS = CHAOS ? 3_600_000 : 600_000;
