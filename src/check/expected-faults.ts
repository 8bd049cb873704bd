// Which faults the checker expects to break which invariant: a violation of I3, I4 or I5 under
// one of them is reported as expected, and I1 must then catch its consequences.

/**
 * Faults under which I3 (store-clock exclusivity) is expected to fail; I1 must then catch
 * the consequences.
 */
export const I3_EXPECTED_FAULTS: ReadonlySet<string> = new Set([
  'store_clock_jump',
  'store_clock_back',
  'failover',
  'store_restart_unsynced',
  'restore',
  'eviction',
]);

/**
 * Faults under which I5 (linearizability against the lease model, by the store's own clock)
 * is expected to fail: the store loses state or its clock goes back. A store clock jumping
 * forward is not here — by its own clock the store is still a linearizable lease.
 */
export const I5_EXPECTED_FAULTS: ReadonlySet<string> = new Set([
  'store_clock_back',
  'failover',
  'store_restart_unsynced',
  'restore',
  'eviction',
]);

/** Faults under which I4 (client conservatism) is expected to fail for the named proc. */
export const I4_EXPECTED_FAULTS: ReadonlySet<string> = new Set([
  'client_clock_jump',
  'client_clock_rate',
  ...I3_EXPECTED_FAULTS,
]);
