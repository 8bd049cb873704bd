import type {
  FaultEvent,
  HistoryEvent,
  MetaEvent,
  ResourceEvent,
  StoreEvent,
  WriteEvent,
} from '../history/events.js';
import { checkI6 } from './acknowledged-writes.js';
import { checkI4 } from './client-conservatism.js';
import { checkI9 } from './first-write-fencing.js';
import { collectGrants, countLocalSuccessions, isClientEvent } from './grants.js';
import { checkI5 } from './linearizable-store-ops.js';
import { checkLiveness } from './liveness.js';
import { checkI7 } from './release-renew-safety.js';
import type { CheckOptions, CheckReport, InvariantStatus, Violation } from './report.js';
import { checkI1 } from './resource-fencing.js';
import { checkI12 } from './lock-delay.js';
import { checkI10 } from './semaphore-limit.js';
import { checkI11 } from './set-atomicity.js';
import { checkI3 } from './store-exclusivity.js';
import { checkI2 } from './token-order.js';

export { formatFigures, formatReport, percentile } from './format.js';
export type {
  CheckOptions,
  CheckReport,
  HistoryFigures,
  InvariantId,
  InvariantReport,
  InvariantStatus,
  Violation,
} from './report.js';

/**
 * Checks a history against I1–I7, the liveness bound (I8) and I9–I12, and returns a verdict with
 * counterexamples and figures. Pure: no I/O, deterministic.
 *
 * - I1: per resource, no write applied with a token below one applied before.
 * - I2: tokens granted per key are unique and follow real-time order of acquisitions.
 * - I3: by the store's clock, leases on a key do not overlap (expected to fail under store
 *   clock jumps, failover, restore, eviction — then reported as `expected`).
 * - I4: the client's deadline is not later than the store's expiry (expected to fail under
 *   client clock faults).
 * - I5: the `store_op` records are linearizable against the fenced mutex model, `:info`
 *   handled (src/check/linearizability.ts); `unknown` past the search budget, `not_checked`
 *   without store operations.
 * - I6: every write acknowledged as applied is in the resource's final contents; no write the
 *   resource rejected was acknowledged as applied.
 * - I7: renew/release never succeed for a lease that is expired, released or superseded.
 * - I8: with a liveness bound, a waiting acquirer gets a freed key within the bound.
 * - I9: once a claim on a resource was applied, no write with a lower token is applied there,
 *   even before the claiming owner's first write (`not_checked` without `claim` events).
 * - I10: by the store's clock, a semaphore never has more valid slot holders than its limit.
 * - I11: a set of keys reported held was wholly held at one instant of the store's clock.
 * - I12: no key is granted within the lock-delay after an end by expiry (store clock).
 *
 * @example
 * const report = checkHistory(parseHistory(readFileSync('history.jsonl', 'utf8')));
 * console.log(formatReport(report));
 */
export function checkHistory(
  events: readonly HistoryEvent[],
  options: CheckOptions = {},
): CheckReport {
  const max = options.maxExamples ?? 5;
  const meta = events.find((e): e is MetaEvent => e.type === 'meta');
  const faults = events.filter((e): e is FaultEvent => e.type === 'fault');
  const clientEvents = events.filter(isClientEvent);
  const storeEvents = events.filter((e): e is StoreEvent => e.type === 'store');
  const writes = events.filter((e): e is WriteEvent => e.type === 'write');
  const resourceEvents = events.filter((e): e is ResourceEvent => e.type === 'resource');

  const grants = collectGrants(clientEvents, storeEvents);

  const i1 = checkI1(resourceEvents);
  const i2 = checkI2(clientEvents, storeEvents);
  const tolerance = options.timeToleranceMs ?? meta?.timeToleranceMs ?? 0;
  const i3 = checkI3(grants, faults, tolerance);
  const i4 = checkI4(events, faults, tolerance);
  const i5 = checkI5(events, faults, tolerance, options.linearizability);
  const i6 = checkI6(events, writes, resourceEvents);
  const i7 = checkI7(storeEvents, events);
  const bound = options.livenessBoundMs ?? meta?.livenessBoundMs;
  const i8 = checkLiveness(grants, clientEvents, events, bound);
  const i9 = checkI9(events);
  const i10 = checkI10(grants, clientEvents, faults, tolerance);
  const i11 = checkI11(grants, clientEvents, faults, tolerance);
  const i12 = checkI12(grants, faults, tolerance);

  const limit = (r: { violations: Violation[]; status: InvariantStatus; note?: string }) => ({
    status: r.status,
    violations: r.violations.slice(0, max),
    ...(r.note === undefined ? {} : { note: r.note }),
  });
  const invariants = {
    I1: limit(i1),
    I2: limit(i2),
    I3: limit(i3),
    I4: limit(i4.report),
    I5: limit(i5),
    I6: limit(i6.report),
    I7: limit(i7),
    I8: limit(i8.report),
    I9: limit(i9),
    I10: limit(i10),
    I11: limit(i11),
    I12: limit(i12),
  };
  const valid = Object.values(invariants).every((r) => r.status !== 'violated');
  return {
    valid,
    invariants,
    events: events.length,
    figures: {
      grants: grants.length,
      handOffs: storeEvents.filter((e) => e.action === 'grant' && e.handOff === true).length,
      localSuccessions: countLocalSuccessions(clientEvents, storeEvents),
      fencedWritesAttempted: writes.filter((w) => w.phase === 'invoke' && w.fenced !== false)
        .length,
      unfencedWritesAttempted: writes.filter((w) => w.phase === 'invoke' && w.fenced === false)
        .length,
      staleWritesRejected: resourceEvents.filter((r) => r.action === 'rejected').length,
      staleWritesAccepted: i1.violations.length,
      staleFirstWritesAccepted: i9.staleFirstWrites,
      claimsApplied: i9.claimsApplied,
      i3Overlaps: i3.violations.length,
      lostAcknowledgedWrites: i6.lost,
      takeoverMs: i8.takeovers,
      minSlackMs: i4.minSlack,
    },
  };
}
