import { WakeLines } from '../../core/runtime/wake-lines.js';

/** One key's record: its last grant and, while the lease lives, its holder. */
export interface Row {
  /** The holder's token (or the last holder's): renew and release compare it. */
  lastToken: bigint;
  /** The highest token granted or reserved (`lastToken + tokenBlock − 1`); the next grant is above it. */
  topToken: bigint;
  leaseId: string | undefined;
  ownerId: string | undefined;
  expiresAt: number;
  value: string | undefined;
  /** The holder's lock-delay: after an expiry (not a release) no grant until expiresAt + this. */
  lockDelayMs?: number;
}

/**
 * The state behind one or more {@link MemoryLeaseStore} instances. Share it to model a store
 * that several clients (or a re-opened store) see.
 */
export class MemoryLeaseState {
  readonly rows = new Map<string, Row>();
  readonly watchers = new WakeLines('all');
}
