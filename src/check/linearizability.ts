/**
 * I5: is a history of store operations (`store_op` events) linearizable against the fenced
 * mutex model, with `:info` operations handled? Each key is checked on its own (keys are
 * independent objects, so the history is linearizable iff every key's sub-history is: the
 * P-compositionality Porcupine exploits).
 *
 * The model, per key (the LeaseStore contract in src/core/store.ts):
 * - state: the holder (a lease label, none, or an unknown holder from before the history),
 *   the last granted token (the holder's), the token block that grant reserved, and the
 *   holder's expiry `E` by the store's clock;
 * - a lease is free at store time `T` when `E ≤ T`;
 * - `acquire(lease, ttl)`: free → `acquired(token)` with token **greater than** every earlier
 *   grant (gaps allowed: PostgreSQL sequences burn numbers, Redis floors tokens at TIME×1024,
 *   etcd uses revisions) **and above the top of every block reserved before** (a grant of `t`
 *   with `tokenBlock` `b` keeps `t` as the holder's token and reserves `t … t + b − 1`, decision
 *   007), `E = T + ttl`; held live by the same lease → `acquired` with the same token, expiry
 *   unchanged, nothing more reserved (an idempotent retry); held live by another → `busy`;
 * - `renew(lease, token, ttl)`: same lease, same token, live → `renewed`, `E = T + ttl`;
 *   otherwise `lost`, no change;
 * - `release(lease, token)`: same lease and token → `released` (the key is free); a store may
 *   also answer `not_owner` once that lease has expired (Redis's key is gone by then);
 *   otherwise `not_owner`, no change;
 * - `hand_off(release lease/token, lease, ttl)` (`releaseAndAcquire`): `release` and then
 *   `acquire` at the **same** store instant `T`, with nothing in between; the answer carries
 *   both outcomes (`released` / `not_owner`, then `acquired(token)` / `busy`). So a hand-off
 *   that grants without its release taking effect needs the key free anyway, its token must
 *   exceed the released one, and `released` + `busy` is impossible;
 * - `:info` (timeout, unavailable, no answer): the operation may take effect at any time after
 *   its invocation, or never. Only its effectful outcomes are tried (a grant with an unknown
 *   token, a renewal, a release of a live lease): a no-effect outcome is the same as never.
 *
 * Time: each operation carries a window `[lo, hi]` of store time (the store's clock when it
 * was sent and when its answer was read). The search does not pick instants: it keeps a zone
 * of difference constraints (src/check/time-zone.ts), so "A's grant at T_A, B's at T_B ≥
 * T_A + ttl, both inside their windows" is decided exactly. Operations the store performs one
 * after another see a clock that does not go back. Without store times the windows are
 * unbounded and only ownership, token order and real-time order are checked (expiry can then
 * explain any handover).
 *
 * The search is Wing & Gong's, with Lowe's memoisation of (linearized set, model state), as in
 * Porcupine (anishathalye/porcupine, checker.go: `checkSingle` — the doubly linked list of call
 * and return entries sorted by time with calls first on ties, `lift`/`unlift`, the cache of
 * bitset + state, the stack of calls to backtrack) and Knossos (jepsen-io/knossos, wgl.clj:
 * `:info` operations have no return, so they may stay unlinearized, and the search succeeds
 * once every completed operation is linearized). Differences: the model is nondeterministic
 * (a step may yield several states); candidates at a node are tried completed-first, `:info`
 * last, and only one `:info` operation per effect (interchangeable ones are tried once); a
 * branch is cut as soon as its store time has passed the end of a pending completed
 * operation's window. Each key's search is bounded by a step budget; past it the answer is
 * `unknown`.
 */
import type { HistoryEvent, MetaEvent, StoreOpEvent, StoreOpFunction } from '../history/events.js';
import { prepare, search, type SearchOutcome } from './linearizability-search.js';
import { initialState } from './mutex-model.js';

/** Options for {@link checkLinearizability}. */
export interface LinearizabilityOptions {
  /** Model steps the search may take per key before answering `unknown`. Defaults to 200,000. */
  readonly maxStepsPerKey?: number;
  /**
   * What the key looked like before the history: `unknown` (default) allows a holder from
   * before it, with an unknown expiry, that nobody in the history renews or releases; `none`
   * says the key was free.
   */
  readonly initialHolder?: 'unknown' | 'none';
  /** Use `t` as store time where `storeAt` is missing (see `MetaEvent.storeTimeFromT`). */
  readonly storeTimeFromT?: boolean;
  /** Widens every store-time window by this much on each side (ms). Defaults to 0. */
  readonly timeToleranceMs?: number;
}

/** Default budget per key: a few hundred ms of search at worst, far above what sim runs need. */
export const DEFAULT_MAX_STEPS_PER_KEY = 200_000;

/** The answer an operation got, `info` when unknown. */
export type StoreOpOutcome =
  'acquired' | 'busy' | 'renewed' | 'lost' | 'released' | 'not_owner' | 'info';

/** One store operation of a key's sub-history, as the search sees it. */
export interface LeaseOp {
  readonly op: string;
  readonly proc: string;
  readonly key: string;
  readonly f: StoreOpFunction;
  readonly lease: string;
  /** Renew/release: the token the request carried. */
  readonly token: bigint | undefined;
  /** Hand_off: the lease it releases, that lease's token, and what the release answered. */
  readonly releaseLease: string | undefined;
  readonly releaseToken: bigint | undefined;
  readonly released: 'released' | 'not_owner' | undefined;
  readonly ttlMs: number | undefined;
  /** Acquire and hand_off: the token block asked for (`tokenBlock`; 1 when absent). */
  readonly tokenBlock: number;
  /** Acquire and hand_off: the lock-delay the grant asks for (0 when none). */
  readonly lockDelayMs: number;
  /** Acquire and hand_off: the request skips the holder's lock-delay. */
  readonly ignoreLockDelay: boolean;
  readonly outcome: StoreOpOutcome;
  /** Acquire `acquired`: the token granted. */
  readonly granted: bigint | undefined;
  readonly invokeT: number;
  /** +∞ for `:info`. */
  readonly completeT: number;
  /** Store-time window of the moment it took effect; ±∞ where unknown. */
  readonly storeLo: number;
  readonly storeHi: number;
  /** False when a store-time bound the answer could have had is missing (no `storeAt`). */
  readonly timed: boolean;
  readonly events: readonly StoreOpEvent[];
}

/** Why a key's sub-history has no linearization, narrowed to where it breaks. */
export interface LinearizabilityCounterexample {
  readonly key: string;
  /**
   * The operation whose answer first makes the history non-linearizable: every prefix of the
   * history answered before it is linearizable (operations still pending are `:info`).
   */
  readonly culprit: LeaseOp;
  /** Harness-time window: from the earliest invocation of an operation overlapping the culprit to its answer. */
  readonly from: number;
  readonly to: number;
  /**
   * The culprit, then (at most 8) operations answered inside the window and `:info` ones sent
   * inside it or for the culprit's lease.
   */
  readonly ops: readonly LeaseOp[];
  /** The last operations answered before the window (context). */
  readonly before: readonly LeaseOp[];
  /** `:info` operations sent before the window, still free to take effect (not listed). */
  readonly olderInfo: number;
  /** What the model said when the search tried the culprit and its neighbours. */
  readonly reasons: readonly string[];
}

/** The verdict for one key. */
export type KeyLinearizability =
  | { readonly key: string; readonly status: 'ok'; readonly ops: number; readonly steps: number }
  | {
      readonly key: string;
      readonly status: 'unknown';
      readonly ops: number;
      readonly steps: number;
    }
  | {
      readonly key: string;
      readonly status: 'violated';
      readonly ops: number;
      readonly steps: number;
      readonly counterexample: LinearizabilityCounterexample;
    };

/** The verdict over all keys. `not_checked` when the history holds no store operations. */
export interface LinearizabilityResult {
  readonly status: 'ok' | 'violated' | 'unknown' | 'not_checked';
  readonly keys: readonly KeyLinearizability[];
  readonly ops: number;
  readonly steps: number;
  /** Operations lacking a store-time bound (`storeAt`): expiry is unconstrained there. */
  readonly untimedOps: number;
}

/**
 * Checks the `store_op` events of a history against the fenced mutex model, key by key.
 * Pure and deterministic; bounded by `maxStepsPerKey` per key (and a few times that for
 * narrowing a counterexample).
 *
 * @example
 * const r = checkLinearizability(parseHistory(text));
 * if (r.status === 'violated') console.log(r.keys.find((k) => k.status === 'violated'));
 */
export function checkLinearizability(
  events: readonly HistoryEvent[],
  options: LinearizabilityOptions = {},
): LinearizabilityResult {
  const meta = events.find((e): e is MetaEvent => e.type === 'meta');
  const byKey = collectLeaseOps(events, {
    storeTimeFromT: options.storeTimeFromT ?? meta?.storeTimeFromT ?? false,
    toleranceMs: options.timeToleranceMs ?? 0,
  });
  const budget = options.maxStepsPerKey ?? DEFAULT_MAX_STEPS_PER_KEY;
  const priorHolder = (options.initialHolder ?? 'unknown') === 'unknown';
  const keys: KeyLinearizability[] = [];
  let ops = 0;
  let steps = 0;
  let untimed = 0;
  for (const [key, list] of byKey) {
    ops += list.length;
    untimed += list.filter((o) => !o.timed).length;
    const verdict = checkKey(key, list, budget, priorHolder);
    steps += verdict.steps;
    keys.push(verdict);
  }
  const status =
    ops === 0
      ? 'not_checked'
      : keys.some((k) => k.status === 'violated')
        ? 'violated'
        : keys.some((k) => k.status === 'unknown')
          ? 'unknown'
          : 'ok';
  return { status, keys, ops, steps, untimedOps: untimed };
}

/**
 * Pairs `store_op` invocations with their answers, per key, in invocation order. An answer
 * without an invocation is ignored; an invocation without one is `:info`.
 */
export function collectLeaseOps(
  events: readonly HistoryEvent[],
  options: { storeTimeFromT: boolean; toleranceMs: number },
): Map<string, LeaseOp[]> {
  const invokes = new Map<string, StoreOpEvent>();
  const answers = new Map<string, StoreOpEvent>();
  for (const e of events) {
    if (e.type !== 'store_op') continue;
    if (e.phase === 'invoke') {
      if (!invokes.has(e.op)) invokes.set(e.op, e);
    } else if (!answers.has(e.op)) answers.set(e.op, e);
  }
  const tol = options.toleranceMs;
  const byKey = new Map<string, LeaseOp[]>();
  for (const inv of invokes.values()) {
    const ans = answers.get(inv.op);
    const known = ans !== undefined && ans.phase !== 'info' && ans.f === inv.f;
    const lo = inv.storeAt ?? (options.storeTimeFromT ? inv.t : -Infinity);
    const hi = known ? (ans.storeAt ?? (options.storeTimeFromT ? ans.t : Infinity)) : Infinity;
    const timed = lo !== -Infinity && (!known || hi !== Infinity);
    const op: LeaseOp = {
      op: inv.op,
      proc: inv.proc,
      key: inv.key,
      f: inv.f,
      lease: inv.lease ?? inv.op,
      token: inv.token === undefined ? undefined : BigInt(inv.token),
      releaseLease: inv.releaseLease,
      releaseToken: inv.releaseToken === undefined ? undefined : BigInt(inv.releaseToken),
      released: known ? ans.released : undefined,
      ttlMs: inv.ttlMs,
      tokenBlock: inv.tokenBlock ?? 1,
      lockDelayMs: inv.lockDelayMs ?? 0,
      ignoreLockDelay: inv.ignoreLockDelay === true,
      outcome: known ? (ans.phase as StoreOpOutcome) : 'info',
      granted: known && ans.token !== undefined ? BigInt(ans.token) : undefined,
      invokeT: inv.t,
      // An answer stamped before its request (clock trouble) is read as immediate.
      completeT: known ? Math.max(ans.t, inv.t) : Infinity,
      storeLo: lo - tol,
      storeHi: hi + tol,
      timed,
      events: ans === undefined ? [inv] : [inv, ans],
    };
    const list = byKey.get(inv.key) ?? [];
    list.push(op);
    byKey.set(inv.key, list);
  }
  for (const list of byKey.values()) list.sort((a, b) => a.invokeT - b.invokeT);
  return byKey;
}

// ---------------------------------------------------------------------------------------
// The model

function checkKey(
  key: string,
  list: readonly LeaseOp[],
  budget: number,
  priorHolder: boolean,
): KeyLinearizability {
  const init = initialState(priorHolder);
  const full = prepare(list, Infinity);
  const r = search(full.ops, full.names, init, budget);
  if (r.status !== 'violated') return { key, status: r.status, ops: list.length, steps: r.steps };
  // Narrow: the first answer (in harness time) whose prefix has no linearization. A prefix
  // keeps what was answered by then and turns what was still pending into :info, so it is a
  // relaxation of any longer prefix: "not linearizable" is monotone and a binary search is
  // exact.
  const times = [...new Set(list.filter((o) => o.outcome !== 'info').map((o) => o.completeT))].sort(
    (a, b) => a - b,
  );
  let lo = 0;
  let hi = times.length - 1;
  let steps = r.steps;
  let failing: SearchOutcome | undefined;
  let failingAt = -1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const p = prepare(list, times[mid]!);
    const m = search(p.ops, p.names, init, budget);
    steps += m.steps;
    if (m.status === 'violated') {
      hi = mid;
      failing = m;
      failingAt = mid;
    } else if (m.status === 'ok') lo = mid + 1;
    else break; // Over budget: keep the narrowest failing prefix found so far.
  }
  const cut = times[hi]!;
  if (failing === undefined || failingAt !== hi) {
    // The reasons must come from a search of exactly this prefix (operation indices match).
    const p = prepare(list, cut);
    failing = search(p.ops, p.names, init, budget);
    steps += failing.steps;
  }
  const prefix = prepare(list, cut).ops;
  const culpritIndex = prefix.findIndex((o) => o.outcome !== 'info' && o.src.completeT === cut);
  const culprit = prefix[culpritIndex]!.src;
  const indexed = prefix.map((o, i) => ({ o: o.src, info: o.outcome === 'info', i }));
  // Answered operations overlapping the culprit in real time: the ones it could be ordered
  // either way with. They set the window.
  const overlapping = indexed.filter(
    ({ o, info, i }) =>
      !info &&
      i !== culpritIndex &&
      o.invokeT <= culprit.completeT &&
      o.completeT >= culprit.invokeT,
  );
  const from = Math.min(culprit.invokeT, ...overlapping.map(({ o }) => o.invokeT));
  // :info operations overlap everything after their invocation; list the ones sent inside
  // the window or for the culprit's own lease, and only count the older ones.
  const pending = indexed.filter(
    ({ o, info }) => info && (o.invokeT >= from || o.lease === culprit.lease),
  );
  const olderInfo = indexed.filter(({ info }) => info).length - pending.length;
  const before = indexed
    .filter(({ o, info }) => !info && o.completeT < from)
    .sort((a, b) => a.o.completeT - b.o.completeT)
    .slice(-3);
  const reasons: string[] = [];
  for (const i of [culpritIndex, ...overlapping.map((x) => x.i), ...pending.map((x) => x.i)]) {
    for (const why of failing.reasons.get(i) ?? []) {
      const line = `${prefix[i]!.src.op}: ${why}`;
      if (reasons.length < 4 && !reasons.includes(line)) reasons.push(line);
    }
  }
  return {
    key,
    status: 'violated',
    ops: list.length,
    steps,
    counterexample: {
      key,
      culprit,
      from,
      to: cut,
      ops: [culprit, ...[...overlapping, ...pending].slice(0, 8).map((x) => x.o)],
      before: before.map((x) => x.o),
      olderInfo,
      reasons,
    },
  };
}

/** One line for an operation: `o12 w1 acquire(L3, ttl 500) → acquired 7 [t 100..105, store 100..105]`. */
export function describeLeaseOp(o: LeaseOp): string {
  const block = o.tokenBlock > 1 ? `, block ${o.tokenBlock}` : '';
  const args =
    o.f === 'acquire'
      ? `${o.lease}, ttl ${o.ttlMs}${block}`
      : o.f === 'renew'
        ? `${o.lease}, token ${o.token}, ttl ${o.ttlMs}`
        : o.f === 'hand_off'
          ? `release ${o.releaseLease} token ${o.releaseToken} → ${o.lease}, ttl ${o.ttlMs}${block}`
          : `${o.lease}, token ${o.token}`;
  const answer =
    (o.outcome === 'acquired' ? `acquired ${o.granted}` : o.outcome) +
    (o.released === undefined ? '' : ` (${o.released})`);
  const range = (a: number, b: number) =>
    `${a === -Infinity ? '?' : a}..${b === Infinity ? '∞' : b}`;
  return `${o.op} ${o.proc} ${o.f}(${args}) → ${answer} [t ${range(o.invokeT, o.completeT)}, store ${range(o.storeLo, o.storeHi)}]`;
}
