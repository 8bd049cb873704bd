import type { HolderInfo, LeaseState } from '../core/types.js';

/** A holder as JSON: token as a decimal string, never the full lease id. */
export function holderJson(h: HolderInfo): Record<string, unknown> {
  return {
    ownerId: h.ownerId,
    token: h.token.toString(),
    remainingMs: h.remainingMs,
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
