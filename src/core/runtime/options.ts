import { invalidArgument } from './errors.js';

/**
 * Checks for the options bag of a constructor or call: an object, or `ERR_INVALID_ARGUMENT`
 * naming `field` and what was expected.
 */
export function requireObject<T>(value: T, field = 'options', rule = 'must be an object'): T {
  if (typeof value !== 'object' || value === null) throw invalidArgument(field, rule, value);
  return value;
}

/** An optional whole-number option in `[min, max]`, or `fallback` when absent. */
export function integerOption(
  field: string,
  value: unknown,
  fallback: number,
  min: number,
  max: number,
): number {
  const n = value ?? fallback;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    throw invalidArgument(field, `must be an integer from ${min} to ${max}`, n);
  }
  return n;
}

/** An optional number option in `[min, maxExclusive)`, or `fallback` when absent. */
export function ratioOption(
  field: string,
  value: unknown,
  fallback: number,
  min: number,
  maxExclusive: number,
): number {
  const n = value ?? fallback;
  if (typeof n !== 'number' || !(n >= min && n < maxExclusive)) {
    throw invalidArgument(field, `must be a number in [${min}, ${maxExclusive})`, n);
  }
  return n;
}

/** An optional boolean option, or `fallback` when absent. */
export function booleanOption(field: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidArgument(field, 'must be a boolean', value);
  return value;
}
