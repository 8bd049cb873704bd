import { existsSync } from 'node:fs';

/** Blocking the worker's event loop on purpose: a pause that signals cannot make. */

export function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // Deliberately blocks the event loop: timers, renewals and IPC all wait.
  }
}

/** The longest a gated busy loop waits for its gate file: a stuck harness fails, not hangs. */
const BUSY_GATE_LIMIT_MS = 60_000;

/**
 * Blocks the event loop, like {@link spin}, until `path` exists (the harness's gate: IPC
 * cannot reach a blocked process, a file check can), at most {@link BUSY_GATE_LIMIT_MS}.
 */
export function spinUntilFile(path: string): void {
  const end = performance.now() + BUSY_GATE_LIMIT_MS;
  while (!existsSync(path) && performance.now() < end) {
    // Blocks as spin() does; the file check is the only way out before the limit.
  }
}
