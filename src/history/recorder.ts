import type { HistoryEvent } from './events.js';
import { formatHistory } from './parse.js';

/**
 * Collects history events in memory, in the order they happen. The simulation and the fault
 * harness record through it; `lines()` gives the JSON-lines text.
 */
export class HistoryRecorder {
  readonly events: HistoryEvent[] = [];
  private nextOp = 1;

  /** A fresh operation id: `prefix` + a counter, deterministic in recording order. */
  newOp(prefix = 'op'): string {
    return `${prefix}${this.nextOp++}`;
  }

  record(event: HistoryEvent): void {
    this.events.push(event);
  }

  lines(): string {
    return formatHistory(this.events);
  }
}
