import { systemClock, type Clock } from '../../core/runtime/clock.js';
import { MemoryLeaseState } from './state.js';

/** Options for {@link MemoryLeaseStore}. */
export interface MemoryLeaseStoreOptions {
  /** The store's clock: expiry is decided by it. Defaults to the system monotonic clock. */
  readonly clock?: Clock;
  /** Shared state, to let several store instances see the same leases. Defaults to a new one. */
  readonly state?: MemoryLeaseState;
}

/** The defaults of {@link MemoryLeaseStoreOptions} (a store without `state` gets its own). */
export const MEMORY_STORE_DEFAULTS = Object.freeze({ clock: systemClock });

/** {@link MemoryLeaseStoreOptions} with the defaults filled in. */
export interface ResolvedMemoryStoreOptions {
  readonly clock: Clock;
  readonly state: MemoryLeaseState;
}

/**
 * Fills in the defaults. Nothing to reject: both options are objects the caller made (a
 * clock, a shared state), used as given.
 */
export function resolveMemoryStoreOptions(
  options: MemoryLeaseStoreOptions,
): ResolvedMemoryStoreOptions {
  return {
    clock: options.clock ?? MEMORY_STORE_DEFAULTS.clock,
    state: options.state ?? new MemoryLeaseState(),
  };
}
