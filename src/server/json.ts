import type { HolderInfo, LeaseState } from '../core/types.js';

/**
 * A duration or instant in milliseconds as the whole number the API documents. Stores may
 * measure in fractions (PostgreSQL's `clock_timestamp()` has microseconds): every number of
 * milliseconds an answer carries passes through here. Rounded down by default, so a remaining
 * time or an expiry is never overstated; `up` for a time to wait before retrying, so a retry
 * is never early.
 */
export function wholeMs(ms: number, round: 'down' | 'up' = 'down'): number {
  return round === 'up' ? Math.ceil(ms) : Math.floor(ms);
}

/** A holder as JSON: token as a decimal string, never the full lease id. */
export function holderJson(h: HolderInfo): Record<string, unknown> {
  return {
    ownerId: h.ownerId,
    token: h.token.toString(),
    remainingMs: wholeMs(h.remainingMs),
    leaseIdPrefix: h.leaseIdPrefix,
    ...(h.value === undefined ? {} : { value: h.value }),
  };
}

/** A key state as JSON. */
export function stateJson(s: LeaseState): Record<string, unknown> {
  return {
    key: s.key,
    lastToken: s.lastToken.toString(),
    holder: s.holder === undefined ? null : holderJson(s.holder),
  };
}
