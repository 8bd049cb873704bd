/**
 * The error codes leasehold throws. Expected outcomes (busy, lost, stale_fence …) are
 * values, never errors; these codes are for programmer errors, cancellation, an
 * unreachable store seen by a store adapter, and broken invariants.
 */
export type LeaseholdErrorCode =
  /** An argument broke a documented rule; the message names the field and the rule. */
  | 'ERR_INVALID_ARGUMENT'
  /** The caller's AbortSignal fired. */
  | 'ERR_ABORTED'
  /** The lease is no longer valid (lost, expired locally, released, or the clock failed). */
  | 'ERR_LEASE_LOST'
  /** The store could not be reached or did not answer in time. */
  | 'ERR_UNAVAILABLE'
  /** The injected monotonic clock went backwards or returned a non-finite value. */
  | 'ERR_CLOCK'
  /** The store or client was closed. */
  | 'ERR_CLOSED'
  /** A store answered something the contract does not allow (a bug or a corrupt store). */
  | 'ERR_PROTOCOL';

const BRAND = Symbol.for('leasehold.error');

/**
 * The one error class leasehold throws. Check it with {@link isLeaseholdError} rather than
 * `instanceof`, which fails when two copies of the package are loaded.
 */
export class LeaseholdError extends Error {
  readonly code: LeaseholdErrorCode;
  readonly [BRAND] = true;

  constructor(code: LeaseholdErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LeaseholdError';
    this.code = code;
  }
}

/** True when `err` is a {@link LeaseholdError}, optionally with the given code. */
export function isLeaseholdError(err: unknown, code?: LeaseholdErrorCode): err is LeaseholdError {
  return (
    typeof err === 'object' &&
    err !== null &&
    (err as Record<symbol, unknown>)[BRAND] === true &&
    (code === undefined || (err as LeaseholdError).code === code)
  );
}

/** Throws `ERR_INVALID_ARGUMENT` naming the field and the rule it broke. */
export function invalidArgument(field: string, rule: string, got: unknown): LeaseholdError {
  return new LeaseholdError('ERR_INVALID_ARGUMENT', `${field} ${rule}, got ${describe(got)}`);
}

function describe(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
