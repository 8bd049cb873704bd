import { invalidArgument } from './errors.js';

/** A duration: integer milliseconds, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'1h'`. */
export type Duration = number | string;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const DURATION_RE = /^(\d{1,9}(?:\.\d{1,6})?)(ms|s|m|h)$/;

/**
 * Converts a {@link Duration} to whole milliseconds, or throws `ERR_INVALID_ARGUMENT`
 * naming `field`. Fractional milliseconds, NaN, infinities, negative zero and anything
 * that is not a number or a unit string are refused: a duration that silently rounds
 * is a timer that fires at the wrong time.
 */
export function parseDuration(field: string, value: unknown): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || !Number.isInteger(value) || Object.is(value, -0)) {
      throw invalidArgument(field, 'must be a whole number of milliseconds', value);
    }
    return value;
  }
  if (typeof value === 'string') {
    const m = DURATION_RE.exec(value.trim() === value ? value : '');
    if (m) {
      const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
      if (Number.isInteger(ms)) return ms;
      throw invalidArgument(field, 'must be a whole number of milliseconds', value);
    }
    throw invalidArgument(
      field,
      "must be milliseconds or a string like '250ms', '30s', '5m', '1h'",
      value,
    );
  }
  throw invalidArgument(
    field,
    "must be milliseconds or a string like '250ms', '30s', '5m', '1h'",
    value,
  );
}

/** Formats milliseconds for messages: `1500` → `'1.5s'`. */
export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0 && ms !== 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms !== 0) return `${ms / 60_000}m`;
  if (ms >= 1000) return `${ms / 1000}s`;
  return `${ms}ms`;
}
