import { readFileSync } from 'node:fs';
import { hostname, uptime } from 'node:os';

/**
 * This machine's monotonic clock in microseconds (CLOCK_MONOTONIC via `process.hrtime`):
 * the same reading in every process on the machine, unaffected by wall-clock steps.
 */
export function machineMonotonicUs(): bigint {
  return process.hrtime.bigint() / 1000n;
}

let cachedBootId: string | undefined;

/**
 * Identifies the current boot: monotonic readings from another boot are meaningless. Linux
 * gives a random id per boot; elsewhere the boot time rounded to 10 s stands in.
 */
export function machineBootId(): string {
  if (cachedBootId !== undefined) return cachedBootId;
  try {
    cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    cachedBootId = `${hostname()}@${Math.round((Date.now() - uptime() * 1000) / 10_000)}`;
  }
  return cachedBootId;
}
