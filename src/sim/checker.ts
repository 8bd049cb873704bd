import {
  I3_EXPECTED_FAULTS,
  I5_EXPECTED_FAULTS,
  I4_EXPECTED_FAULTS,
  type ClientEvent,
  type FaultEvent,
  type HistoryEvent,
  type MetaEvent,
  type ResourceEvent,
  type StoreEvent,
  type WriteEvent,
} from './history.js';
import {
  checkLinearizability,
  describeLeaseOp,
  type LinearizabilityOptions,
} from './linearizability.js';

/** The invariants the checker knows (VERIFICATION.md); the full I8 is not checked here. */
export type InvariantId = 'I1' | 'I2' | 'I3' | 'I4' | 'I5' | 'I6' | 'I7' | 'I8';

/**
 * `ok`: checked, no violation. `violated`: a safety failure. `expected`: violations under a
 * fault that makes them expected (I3/I4/I5 only) — reported, not a failure. `not_checked`: the
 * history lacks the data (store-side times, a final read, store operations …). `unknown`: the
 * check ran out of its budget (I5) — neither a pass nor a failure.
 */
export type InvariantStatus = 'ok' | 'violated' | 'expected' | 'not_checked' | 'unknown';

/** One counterexample: which invariant, a sentence, and the events that show it. */
export interface Violation {
  readonly invariant: InvariantId;
  readonly message: string;
  readonly events: readonly HistoryEvent[];
}

/** The outcome for one invariant. */
export interface InvariantReport {
  readonly status: InvariantStatus;
  readonly violations: readonly Violation[];
  readonly note?: string;
}

/** Counts a run reports so they can be quoted (VERIFICATION.md "Test goals with figures"). */
export interface HistoryFigures {
  readonly grants: number;
  /** Grants made by a hand-off (`releaseAndAcquire`), a subset of `grants`. */
  readonly handOffs: number;
  /**
   * Acquisitions a client answered with a token of its store lease's block, without a store
   * grant of their own (local succession, decision 007). 0 when the history has no store events.
   */
  readonly localSuccessions: number;
  readonly fencedWritesAttempted: number;
  readonly unfencedWritesAttempted: number;
  readonly staleWritesRejected: number;
  readonly staleWritesAccepted: number;
  readonly i3Overlaps: number;
  readonly lostAcknowledgedWrites: number;
  /** Store-time gaps from a holder's last grant/renew to the next grant, for leases that expired. */
  readonly takeoverMs: readonly number[];
  /** Smallest `store expiry − client deadline` seen (I4 slack); undefined when not measurable. */
  readonly minSlackMs: number | undefined;
}

/** The checker's verdict on one history. */
export interface CheckReport {
  /** True when no safety invariant is violated (expected I3/I4 failures do not count). */
  readonly valid: boolean;
  readonly invariants: Readonly<Record<InvariantId, InvariantReport>>;
  readonly figures: HistoryFigures;
  readonly events: number;
}

/** Options for {@link checkHistory}. */
export interface CheckOptions {
  /** Overrides the history's `meta.livenessBoundMs`. */
  readonly livenessBoundMs?: number;
  /**
   * How far store-side times in the history may be off (ms): an overlap (I3) or a negative
   * slack (I4) within it is not reported. Overrides `meta.timeToleranceMs`. Defaults to 0.
   */
  readonly timeToleranceMs?: number;
  /** Counterexamples kept per invariant. Defaults to 5. */
  readonly maxExamples?: number;
  /**
   * The I5 search: step budget per key, the key's state before the history, store time from
   * `t`. `timeToleranceMs` above also widens I5's store-time windows.
   */
  readonly linearizability?: Omit<LinearizabilityOptions, 'timeToleranceMs'>;
}

interface Grant {
  key: string;
  lease: string;
  token: bigint;
  grantedAt: number;
  expiresAt: number;
  lastRenewAt: number;
  releasedAt: number | undefined;
  event: HistoryEvent;
  /**
   * The interval comes from expiries the client observed (its clock plus the TTL, etcd), not
   * from the store's clock: an overlap it shows is a measurement, not a store-clock fact.
   */
  clientObserved: boolean;
}

/**
 * Checks a history against I1–I7 and the liveness bound (I8), and returns a verdict with
 * counterexamples and figures. Pure: no I/O, deterministic.
 *
 * - I1: per resource, no write applied with a token below one applied before.
 * - I2: tokens granted per key are unique and follow real-time order of acquisitions.
 * - I3: by the store's clock, leases on a key do not overlap (expected to fail under store
 *   clock jumps, failover, restore, eviction — then reported as `expected`).
 * - I4: the client's deadline is not later than the store's expiry (expected to fail under
 *   client clock faults).
 * - I5: the `store_op` records are linearizable against the fenced mutex model, `:info`
 *   handled (src/sim/linearizability.ts); `unknown` past the search budget, `not_checked`
 *   without store operations.
 * - I6: every write acknowledged as applied is in the resource's final contents; no write the
 *   resource rejected was acknowledged as applied.
 * - I7: renew/release never succeed for a lease that is expired, released or superseded.
 * - I8: with a liveness bound, a waiting acquirer gets a freed key within the bound.
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
      i3Overlaps: i3.violations.length,
      lostAcknowledgedWrites: i6.lost,
      takeoverMs: i8.takeovers,
      minSlackMs: i4.minSlack,
    },
  };
}

function countLocalSuccessions(client: ClientEvent[], store: StoreEvent[]): number {
  if (store.length === 0) return 0;
  const granted = new Set<string>();
  for (const e of store)
    if (e.action === 'grant') granted.add(`${e.key}\u0000${e.lease}\u0000${e.token}`);
  return client.filter(
    (e) =>
      e.type === 'acquire' &&
      e.phase === 'ok' &&
      e.lease !== undefined &&
      !granted.has(`${e.key}\u0000${e.lease}\u0000${e.token}`),
  ).length;
}

function isClientEvent(e: HistoryEvent): e is ClientEvent {
  return e.type === 'acquire' || e.type === 'renew' || e.type === 'release';
}

function violation(invariant: InvariantId, message: string, ...events: HistoryEvent[]): Violation {
  return { invariant, message, events };
}

function status(violations: Violation[], expected = false): InvariantStatus {
  if (violations.length === 0) return 'ok';
  return expected ? 'expected' : 'violated';
}

/**
 * Store-side lease intervals: from `store` events when the history has them (they include
 * grants whose answer was lost), else from clients' `ok` answers carrying store expiry.
 */
function collectGrants(client: ClientEvent[], store: StoreEvent[]): Grant[] {
  const byLease = new Map<string, Grant>();
  const grants: Grant[] = [];
  const leaseKey = (key: string, lease: string | undefined, token: string | undefined) =>
    `${key}\u0000${lease ?? ''}\u0000${token ?? ''}`;
  if (store.length > 0) {
    for (const e of store) {
      const id = leaseKey(e.key, e.lease, e.token);
      if (e.action === 'grant' && e.token !== undefined && e.expiresAt !== undefined) {
        if (byLease.has(id)) continue; // an idempotent retry of the same acquisition
        const g: Grant = {
          key: e.key,
          lease: e.lease ?? e.token,
          token: BigInt(e.token),
          grantedAt: e.at,
          expiresAt: e.expiresAt,
          lastRenewAt: e.at,
          releasedAt: undefined,
          event: e,
          clientObserved: false,
        };
        byLease.set(id, g);
        grants.push(g);
      } else if (e.action === 'renewed' && e.expiresAt !== undefined) {
        const g = byLease.get(id);
        if (g) {
          g.expiresAt = Math.max(g.expiresAt, e.expiresAt);
          g.lastRenewAt = e.at;
        }
      } else if (e.action === 'released') {
        const g = byLease.get(id);
        if (g && g.releasedAt === undefined) g.releasedAt = e.at;
      }
    }
    return grants;
  }
  const leaseTtl = new Map<string, number>();
  for (const e of client) {
    if (e.phase === 'invoke' && e.ttlMs !== undefined) leaseTtl.set(e.op, e.ttlMs);
    const id = leaseKey(e.key, e.lease, e.token);
    if (e.type === 'acquire' && e.phase === 'ok' && e.storeExpiresAt !== undefined) {
      if (byLease.has(id) || e.token === undefined) continue;
      const ttl = e.ttlMs ?? leaseTtl.get(e.op);
      if (ttl === undefined) continue;
      const g: Grant = {
        key: e.key,
        lease: e.lease ?? e.token,
        token: BigInt(e.token),
        grantedAt: e.storeExpiresAt - ttl,
        expiresAt: e.storeExpiresAt,
        lastRenewAt: e.storeExpiresAt - ttl,
        releasedAt: undefined,
        event: e,
        clientObserved: e.storeExpiryObservedBy === 'client',
      };
      byLease.set(id, g);
      grants.push(g);
    } else if (e.type === 'renew' && e.phase === 'ok' && e.storeExpiresAt !== undefined) {
      const g = byLease.get(id);
      const ttl = e.ttlMs ?? leaseTtl.get(e.op);
      if (g) {
        g.expiresAt = Math.max(g.expiresAt, e.storeExpiresAt);
        if (ttl !== undefined) g.lastRenewAt = e.storeExpiresAt - ttl;
        if (e.storeExpiryObservedBy === 'client') g.clientObserved = true;
      }
    } else if (e.type === 'release' && e.phase === 'released') {
      const g = byLease.get(id);
      // Without store time, the client's answer time is a later bound on the release.
      if (g && g.releasedAt === undefined) g.releasedAt = Math.min(e.t, g.expiresAt);
    }
  }
  return grants;
}

function checkI1(resource: ResourceEvent[]): { status: InvariantStatus; violations: Violation[] } {
  const violations: Violation[] = [];
  const top = new Map<string, { token: bigint; event: ResourceEvent }>();
  for (const e of resource) {
    if (e.action !== 'applied') continue;
    const token = BigInt(e.token);
    const prev = top.get(e.resource);
    if (prev !== undefined && token < prev.token) {
      violations.push(
        violation(
          'I1',
          `resource ${e.resource} applied token ${token} after token ${prev.token}`,
          prev.event,
          e,
        ),
      );
    } else {
      top.set(e.resource, { token, event: e });
    }
  }
  return { status: status(violations), violations };
}

function checkI2(
  client: ClientEvent[],
  store: StoreEvent[],
): { status: InvariantStatus; violations: Violation[] } {
  const violations: Violation[] = [];
  const invokes = new Map<string, ClientEvent>();
  const oks: { invoke: ClientEvent; ok: ClientEvent }[] = [];
  for (const e of client) {
    if (e.type !== 'acquire') continue;
    if (e.phase === 'invoke') invokes.set(e.op, e);
    else if (e.phase === 'ok' && e.token !== undefined) {
      const inv = invokes.get(e.op);
      oks.push({ invoke: inv ?? e, ok: e });
    }
  }
  // Uniqueness: one token, one acquisition (a retried request of the same lease may repeat it).
  const seen = new Map<string, ClientEvent>();
  for (const { ok } of oks) {
    const id = `${ok.key}\u0000${ok.token}`;
    const prev = seen.get(id);
    if (prev !== undefined && (prev.lease === undefined || prev.lease !== ok.lease)) {
      violations.push(
        violation('I2', `token ${ok.token} on ${ok.key} was granted to two acquisitions`, prev, ok),
      );
    } else seen.set(id, ok);
  }
  // Real-time order: if A completed before B was invoked, token(A) < token(B).
  const byKey = new Map<string, { invoke: ClientEvent; ok: ClientEvent }[]>();
  for (const p of oks) {
    const list = byKey.get(p.ok.key) ?? [];
    list.push(p);
    byKey.set(p.ok.key, list);
  }
  for (const list of byKey.values()) {
    const byOk = [...list].sort((a, b) => a.ok.t - b.ok.t);
    const byInvoke = [...list].sort((a, b) => a.invoke.t - b.invoke.t);
    let i = 0;
    let best: { token: bigint; ok: ClientEvent } | undefined;
    for (const b of byInvoke) {
      while (i < byOk.length && byOk[i]!.ok.t < b.invoke.t) {
        const tok = BigInt(byOk[i]!.ok.token!);
        if (best === undefined || tok > best.token) best = { token: tok, ok: byOk[i]!.ok };
        i++;
      }
      if (best !== undefined && BigInt(b.ok.token!) <= best.token) {
        violations.push(
          violation(
            'I2',
            `acquisition with token ${b.ok.token} on ${b.ok.key} was invoked after one with token ${best.token} completed`,
            best.ok,
            b.invoke,
            b.ok,
          ),
        );
      }
    }
  }
  // At the store, grants on a key carry strictly increasing tokens in the store's order.
  const last = new Map<string, { token: bigint; event: StoreEvent; lease?: string }>();
  for (const e of store) {
    if (e.action !== 'grant' || e.token === undefined) continue;
    const tok = BigInt(e.token);
    const prev = last.get(e.key);
    if (
      prev !== undefined &&
      tok <= prev.token &&
      !(tok === prev.token && e.lease === prev.lease)
    ) {
      violations.push(
        violation(
          'I2',
          `store granted token ${tok} on ${e.key} after token ${prev.token}`,
          prev.event,
          e,
        ),
      );
    }
    if (prev === undefined || tok > prev.token)
      last.set(e.key, { token: tok, event: e, lease: e.lease });
  }
  return { status: status(violations), violations };
}

function checkI3(
  grants: Grant[],
  faults: FaultEvent[],
  tolerance: number,
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  if (grants.length === 0)
    return { status: 'not_checked', violations: [], note: 'no store-side lease times' };
  const violations: Violation[] = [];
  // Overlaps between intervals of which one came from client-observed expiries: reported,
  // but undecidable by the store's clock (`unknown`), never counted as violated.
  const observed: Violation[] = [];
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byKey.get(g.key) ?? [];
    list.push(g);
    byKey.set(g.key, list);
  }
  for (const list of byKey.values()) {
    list.sort((a, b) => a.grantedAt - b.grantedAt || (a.token < b.token ? -1 : 1));
    let open: Grant | undefined;
    for (const g of list) {
      if (open !== undefined && g.grantedAt + tolerance < endOf(open)) {
        const clientView = open.clientObserved || g.clientObserved;
        (clientView ? observed : violations).push(
          violation(
            'I3',
            `on ${g.key}, token ${g.token} was granted at ${g.grantedAt} while token ${open.token} was valid until ${endOf(open)} (${clientView ? 'expiry observed by the client' : 'store clock'})`,
            open.event,
            g.event,
          ),
        );
      }
      if (open === undefined || endOf(g) > endOf(open)) open = g;
    }
  }
  const expectedBy = faults.find((f) => I3_EXPECTED_FAULTS.has(f.fault));
  const clientIntervals = grants.filter((g) => g.clientObserved).length;
  const clientNote =
    clientIntervals === 0
      ? undefined
      : `${clientIntervals} of ${grants.length} intervals from expiries observed by the client (the store states none on its clock)` +
        (observed.length > 0 ? `; ${observed.length} overlap(s) among them undecidable` : '');
  const notes = [
    expectedBy !== undefined && violations.length > 0
      ? `expected under fault ${expectedBy.fault}; I1 must catch the consequences`
      : undefined,
    clientNote,
  ].filter((n): n is string => n !== undefined);
  const st: InvariantStatus =
    violations.length > 0
      ? status(violations, expectedBy !== undefined)
      : observed.length > 0
        ? 'unknown'
        : 'ok';
  return {
    status: st,
    violations: [...violations, ...observed],
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
  };
}

function endOf(g: Grant): number {
  return g.releasedAt === undefined ? g.expiresAt : Math.min(g.expiresAt, g.releasedAt);
}

function checkI4(
  events: readonly HistoryEvent[],
  faults: FaultEvent[],
  tolerance: number,
): {
  report: { status: InvariantStatus; violations: Violation[]; note?: string };
  minSlack: number | undefined;
} {
  const latest = new Map<string, number>();
  const violations: Violation[] = [];
  const expectedProcs = new Set<string>();
  let globalExpected = false;
  for (const f of faults) {
    if (!I4_EXPECTED_FAULTS.has(f.fault)) continue;
    if (f.proc === undefined || I3_EXPECTED_FAULTS.has(f.fault)) globalExpected = true;
    else expectedProcs.add(f.proc);
  }
  let minSlack: number | undefined;
  let checked = 0;
  let unexpected = 0;
  let observedByClient = 0;
  for (const e of events) {
    if (e.type === 'store') {
      // The store's latest expiry for a lease, as of this point in the history.
      if ((e.action === 'grant' || e.action === 'renewed') && e.expiresAt !== undefined)
        latest.set(`${e.key}\u0000${e.lease ?? e.token ?? ''}`, e.expiresAt);
      continue;
    }
    if (e.type !== 'acquire' && e.type !== 'renew') continue;
    if (e.phase !== 'ok' || e.deadline === undefined) continue;
    if (e.storeExpiresAt !== undefined && e.storeExpiryObservedBy === 'client') {
      // The client's clock on both sides: nothing independent to compare its deadline with.
      observedByClient++;
      continue;
    }
    const storeExpiry = e.storeExpiresAt ?? latest.get(`${e.key}\u0000${e.lease ?? e.token ?? ''}`);
    if (storeExpiry === undefined) continue;
    checked++;
    const slack = storeExpiry - e.deadline;
    const excused = globalExpected || expectedProcs.has(e.proc);
    if (!excused) minSlack = minSlack === undefined ? slack : Math.min(minSlack, slack);
    if (slack < -tolerance) {
      if (!excused) unexpected++;
      violations.push(
        violation(
          'I4',
          `${e.proc}'s deadline ${e.deadline} for token ${e.token} on ${e.key} is ${-slack}ms after the store's expiry ${storeExpiry}`,
          e,
        ),
      );
    }
  }
  if (checked === 0)
    return {
      report: {
        status: 'not_checked',
        violations: [],
        note:
          observedByClient > 0
            ? `the store's expiry was only observed by the client (${observedByClient} answers): no store clock to compare deadlines with`
            : 'no client deadlines with store expiry',
      },
      minSlack,
    };
  const st: InvariantStatus =
    violations.length === 0 ? 'ok' : unexpected > 0 ? 'violated' : 'expected';
  // Unexpected ones first, so the counterexamples shown are the ones that matter.
  violations.sort(
    (a, b) =>
      Number(expectedProcs.has((a.events[0] as ClientEvent).proc)) -
      Number(expectedProcs.has((b.events[0] as ClientEvent).proc)),
  );
  return {
    report: {
      status: st,
      violations,
      ...(st === 'expected' ? { note: 'expected under an injected client clock fault' } : {}),
    },
    minSlack,
  };
}

function checkI5(
  events: readonly HistoryEvent[],
  faults: FaultEvent[],
  tolerance: number,
  options: CheckOptions['linearizability'],
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  const r = checkLinearizability(events, { ...options, timeToleranceMs: tolerance });
  if (r.status === 'not_checked')
    return { status: 'not_checked', violations: [], note: 'no store_op records' };
  const untimed =
    r.untimedOps > 0
      ? `; ${r.untimedOps} without store-time bounds (expiry unconstrained there)`
      : '';
  const summary = `${r.ops} store ops on ${r.keys.length} key(s), ${r.steps} search steps${untimed}`;
  const violations: Violation[] = [];
  for (const k of r.keys) {
    if (k.status !== 'violated') continue;
    const c = k.counterexample;
    violations.push(
      violation(
        'I5',
        [
          `on ${c.key}, no linearization once ${c.culprit.op} is answered (window t ${c.from}..${c.to}): ${describeLeaseOp(c.culprit)}`,
          ...c.reasons.map((r) => `    why: ${r}`),
          ...c.ops.slice(1).map((o) => `    with: ${describeLeaseOp(o)}`),
          ...c.before.map((o) => `    after: ${describeLeaseOp(o)}`),
          ...(c.olderInfo > 0
            ? [`    and ${c.olderInfo} earlier :info operation(s) that may have taken effect`]
            : []),
        ].join('\n'),
        ...c.ops.flatMap((o) => o.events),
      ),
    );
  }
  if (violations.length > 0) {
    const expectedBy = faults.find((f) => I5_EXPECTED_FAULTS.has(f.fault));
    return {
      status: status(violations, expectedBy !== undefined),
      violations,
      note:
        expectedBy === undefined
          ? summary
          : `expected under fault ${expectedBy.fault}: the store is not a linearizable lease there; I1 must catch the consequences`,
    };
  }
  if (r.status === 'unknown') {
    const over = r.keys.filter((k) => k.status === 'unknown').map((k) => k.key);
    return {
      status: 'unknown',
      violations: [],
      note: `budget exceeded on key(s) ${over.join(', ')}; ${summary}`,
    };
  }
  return { status: 'ok', violations: [], note: summary };
}

function checkI6(
  events: readonly HistoryEvent[],
  writes: WriteEvent[],
  resource: ResourceEvent[],
): { report: { status: InvariantStatus; violations: Violation[]; note?: string }; lost: number } {
  const violations: Violation[] = [];
  const rejected = new Map<string, ResourceEvent>();
  for (const r of resource) if (r.action === 'rejected') rejected.set(r.op, r);
  const invokes = new Map<string, WriteEvent>();
  for (const w of writes) if (w.phase === 'invoke') invokes.set(w.op, w);
  for (const w of writes) {
    if (w.phase === 'ok' && rejected.has(w.op)) {
      violations.push(
        violation(
          'I6',
          `write ${w.op} (token ${w.token}) was rejected by the resource but acknowledged to ${w.proc} as applied`,
          rejected.get(w.op)!,
          w,
        ),
      );
    }
  }
  const finals = new Map<string, Set<string>>();
  let finalSeen = false;
  for (const e of events) {
    if (e.type !== 'final') continue;
    finalSeen = true;
    finals.set(e.resource, new Set(e.values));
  }
  let lost = 0;
  if (finalSeen) {
    for (const w of writes) {
      if (w.phase !== 'ok') continue;
      const value = w.value ?? invokes.get(w.op)?.value;
      const contents = finals.get(w.resource);
      if (value === undefined || contents === undefined) continue;
      if (!contents.has(value)) {
        lost++;
        violations.push(
          violation(
            'I6',
            `write ${w.op} by ${w.proc} (token ${w.token}, value ${value}) was acknowledged but is missing from ${w.resource} at the end`,
            invokes.get(w.op) ?? w,
            w,
          ),
        );
      }
    }
  }
  const checked = finalSeen || rejected.size > 0;
  return {
    report: checked
      ? { status: status(violations), violations }
      : { status: 'not_checked', violations: [], note: 'no final read and no rejections' },
    lost,
  };
}

function checkI7(
  store: StoreEvent[],
  events: readonly HistoryEvent[],
): { status: InvariantStatus; violations: Violation[] } {
  const violations: Violation[] = [];
  // At the store: a renew or release succeeds only for the key's current, unexpired lease.
  const current = new Map<
    string,
    { lease?: string; token: string; expiresAt: number; released: boolean }
  >();
  for (const e of store) {
    const cur = current.get(e.key);
    if (e.action === 'grant' && e.token !== undefined) {
      current.set(e.key, {
        lease: e.lease,
        token: e.token,
        expiresAt: e.expiresAt ?? Number.POSITIVE_INFINITY,
        released: false,
      });
    } else if (e.action === 'renewed' || e.action === 'released') {
      const same = cur !== undefined && cur.token === e.token && cur.lease === e.lease;
      if (!same) {
        violations.push(
          violation(
            'I7',
            `store ${e.action === 'renewed' ? 'renewed' : 'released'} token ${e.token} on ${e.key} while the current lease has token ${cur?.token ?? 'none'}`,
            e,
          ),
        );
      } else if (cur.released || e.at >= cur.expiresAt) {
        if (e.action === 'renewed') {
          violations.push(
            violation(
              'I7',
              `store renewed token ${e.token} on ${e.key} at ${e.at}, after it ${cur.released ? 'was released' : `expired at ${cur.expiresAt}`} (resurrection)`,
              e,
            ),
          );
        }
      } else if (e.action === 'renewed' && e.expiresAt !== undefined) {
        cur.expiresAt = e.expiresAt;
      } else if (e.action === 'released') {
        cur.released = true;
      }
    }
  }
  // At the client: a lease it has given up is never renewed again.
  const lostAt = new Map<string, HistoryEvent>();
  for (const e of events) {
    if (e.type === 'lost') lostAt.set(`${e.key}\u0000${e.token}\u0000${e.lease ?? ''}`, e);
    else if (e.type === 'renew' && e.phase === 'ok') {
      const prior = lostAt.get(`${e.key}\u0000${e.token}\u0000${e.lease ?? ''}`);
      if (prior !== undefined) {
        violations.push(
          violation(
            'I7',
            `${e.proc} reported token ${e.token} on ${e.key} renewed after it was lost`,
            prior,
            e,
          ),
        );
      }
    }
  }
  return { status: status(violations), violations };
}

function checkLiveness(
  grants: Grant[],
  client: ClientEvent[],
  events: readonly HistoryEvent[],
  boundMs: number | undefined,
): {
  report: { status: InvariantStatus; violations: Violation[]; note?: string };
  takeovers: number[];
} {
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byKey.get(g.key) ?? [];
    list.push(g);
    byKey.set(g.key, list);
  }
  const takeovers: number[] = [];
  for (const list of byKey.values()) {
    list.sort((a, b) => (a.token < b.token ? -1 : 1));
    for (let i = 0; i + 1 < list.length; i++) {
      const prev = list[i]!;
      if (prev.releasedAt !== undefined) continue;
      takeovers.push(list[i + 1]!.grantedAt - prev.lastRenewAt);
    }
  }
  if (boundMs === undefined || grants.length === 0)
    return {
      report: {
        status: 'not_checked',
        violations: [],
        note: 'no liveness bound in meta or options',
      },
      takeovers,
    };
  const violations: Violation[] = [];
  const endT = events.reduce((m, e) => Math.max(m, e.t ?? 0), 0);
  // A crashed or frozen waiter is not a live contender.
  const stopped = new Set<string>();
  for (const e of events)
    if (e.type === 'fault' && e.proc !== undefined && (e.fault === 'crash' || e.fault === 'pause'))
      stopped.add(e.proc);
  // Acquire operations per key: [invoke, completion or +∞, got it?]
  const ops = new Map<string, { invoke: ClientEvent; done: number; ok: boolean }>();
  for (const e of client) {
    if (e.type !== 'acquire') continue;
    if (e.phase === 'invoke')
      ops.set(e.op, { invoke: e, done: Number.POSITIVE_INFINITY, ok: false });
    else {
      const op = ops.get(e.op);
      if (op) {
        op.done = e.t;
        op.ok = e.phase === 'ok';
      }
    }
  }
  for (const [key, list] of byKey) {
    for (let i = 0; i < list.length; i++) {
      const prev = list[i]!;
      const freeAt = endOf(prev);
      const next = list[i + 1];
      const deadline = freeAt + boundMs;
      if (deadline > endT) continue;
      if (next !== undefined && next.grantedAt <= deadline) continue;
      const starved = [...ops.values()].find(
        (o) =>
          o.invoke.key === key &&
          o.invoke.t <= freeAt &&
          o.done > deadline &&
          !stopped.has(o.invoke.proc),
      );
      if (starved !== undefined) {
        violations.push(
          violation(
            'I8',
            `${key} was free from ${freeAt} (store clock) but ${starved.invoke.proc}'s waiting acquire ${starved.invoke.op} got no grant within ${boundMs}ms`,
            prev.event,
            starved.invoke,
          ),
        );
      }
    }
  }
  return { report: { status: status(violations), violations }, takeovers };
}

/** The p-th percentile (0–100) of `values`, or undefined when empty (nearest-rank). */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** A one-line summary of figures, the form every run prints. */
export function formatFigures(f: {
  runs: number;
  grants: number;
  handOffs?: number;
  localSuccessions?: number;
  fencedWritesAttempted: number;
  staleWritesRejected: number;
  staleWritesAccepted: number;
  i3Overlaps: number;
  takeoverMs: readonly number[];
}): string {
  const p50 = percentile(f.takeoverMs, 50);
  const p99 = percentile(f.takeoverMs, 99);
  const ms = (v: number | undefined) => (v === undefined ? 'n/a' : `${Math.round(v)}ms`);
  return [
    `runs=${f.runs}`,
    `grants=${f.grants}`,
    ...(f.handOffs === undefined ? [] : [`hand_offs=${f.handOffs}`]),
    ...(f.localSuccessions === undefined ? [] : [`local_successions=${f.localSuccessions}`]),
    `fenced_writes_attempted=${f.fencedWritesAttempted}`,
    `stale_writes_rejected=${f.staleWritesRejected}`,
    `stale_writes_accepted=${f.staleWritesAccepted}`,
    `i3_overlaps=${f.i3Overlaps}`,
    `takeover_p50=${ms(p50)}`,
    `takeover_p99=${ms(p99)}`,
  ].join(' ');
}

/** The checker's verdict as text: one line per invariant, counterexamples, figures, verdict. */
export function formatReport(report: CheckReport): string {
  const lines: string[] = [];
  for (const [id, r] of Object.entries(report.invariants) as [InvariantId, InvariantReport][]) {
    const count = r.violations.length;
    const head =
      r.status === 'ok'
        ? `ok${id === 'I5' && r.note ? ` (${r.note})` : ''}`
        : r.status === 'not_checked'
          ? `not checked${r.note ? ` (${r.note})` : ''}`
          : r.status === 'unknown'
            ? `UNKNOWN${r.note ? ` (${r.note})` : ''}`
            : `${r.status === 'expected' ? 'EXPECTED' : 'VIOLATED'}: ${count}${count >= 5 ? '+' : ''} counterexample(s)${r.note ? ` (${r.note})` : ''}`;
    lines.push(`${id} ${INVARIANT_NAMES[id]}: ${head}`);
    for (const v of r.violations) {
      lines.push(`  - ${v.message}`);
      for (const e of v.events) lines.push(`      ${JSON.stringify(e)}`);
    }
  }
  const f = report.figures;
  lines.push(
    `figures: events=${report.events} ${formatFigures({ ...f, runs: 1 })} lost_acknowledged_writes=${f.lostAcknowledgedWrites} min_slack=${f.minSlackMs === undefined ? 'n/a' : `${Math.round(f.minSlackMs)}ms`}`,
  );
  const unknown = Object.entries(report.invariants)
    .filter(([, r]) => r.status === 'unknown')
    .map(([id]) => id);
  lines.push(
    report.valid
      ? `verdict: VALID — no safety invariant violated${unknown.length > 0 ? ` (${unknown.join(', ')} unknown: search budget exceeded)` : ''}`
      : `verdict: INVALID — ${Object.entries(report.invariants)
          .filter(([, r]) => r.status === 'violated')
          .map(([id]) => id)
          .join(', ')} violated`,
  );
  return lines.join('\n');
}

const INVARIANT_NAMES: Record<InvariantId, string> = {
  I1: 'resource fencing',
  I2: 'token order and uniqueness',
  I3: 'store-clock exclusivity',
  I4: 'conservative client deadline',
  I5: 'linearizable acquire/renew/release',
  I6: 'no lost acknowledged writes',
  I7: 'release/renew safety',
  I8: 'liveness bound',
};
