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
 * of difference constraints (src/sim/time-zone.ts), so "A's grant at T_A, B's at T_B ≥
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
import type { HistoryEvent, MetaEvent, StoreOpEvent, StoreOpFunction } from './history.js';
import { StoreTimeZone, type ExpiryGuard } from './time-zone.js';

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

const NONE = -1;
const PRIOR = -2;
/** `SearchOp.releaseLease` of operations that release nothing: matches no holder. */
const NO_LEASE = -3;

/**
 * The model's state. `token`/`exact`: the last grant's token is `token` (exact), or some
 * unknown value above `token` (a grant whose answer was lost). The holder's token is always
 * the last grant's (a grant makes its lease the holder): renew, release and a hand-off's
 * release compare it. `block`: how many tokens the last grant reserved (decision 007; 1 when
 * it asked for no block), so the next grant's token must be greater than the top of that block,
 * `token + block − 1` — or, when the last grant's token `g` is unknown (`g > token`), greater
 * than `g + block − 1`, which is at least `token + block` ({@link floorOf}). An idempotent
 * retry reserves nothing more: it keeps `block`. Renew and release keep it too (the floor
 * stays the top of the holder's block after the key is released).
 */
interface ModelState {
  readonly holder: number;
  readonly token: bigint;
  readonly exact: boolean;
  readonly block: bigint;
  readonly zone: StoreTimeZone;
  readonly key: string;
  /** `key` without the holder (the search may write the holder canonically). */
  readonly rest: string;
  /** The earliest store time the last linearized operation can have taken effect at. */
  readonly lastAt: number;
}

function state(
  holder: number,
  token: bigint,
  exact: boolean,
  block: bigint,
  zone: StoreTimeZone,
): ModelState {
  const rest = `${token}/${exact ? 1 : 0}/${block}/${zone.key}`;
  return {
    holder,
    token,
    exact,
    block,
    zone,
    key: `${holder}/${rest}`,
    rest,
    lastAt: zone.lastAt()[0],
  };
}

/**
 * The next grant's token must be greater than this: the top of the last grant's block
 * (`token + block − 1`), or, when that grant's answer was lost (its token `g > token` is
 * unknown), the least the top of its block can be, `(token + 1) + block − 1`. Sound: a grant
 * above it is legal for some `g`, so a correct store is never flagged.
 */
function floorOf(s: ModelState): bigint {
  return s.exact ? s.token + s.block - 1n : s.token + s.block;
}

/** Why `granted` cannot be the next grant in state `s`. */
function notAbove(granted: bigint, s: ModelState): string {
  const b = s.block;
  if (s.exact)
    return b === 1n
      ? `token ${granted} is not greater than the last grant ${s.token}`
      : `token ${granted} is not greater than ${s.token + b - 1n}, the top of the block of ${b} tokens the last grant ${s.token} reserved (${s.token}..${s.token + b - 1n})`;
  return b === 1n
    ? `token ${granted} is not greater than a grant above ${s.token} whose answer was lost`
    : `token ${granted} is not greater than ${s.token + b}: a grant above ${s.token} whose answer was lost reserved a block of ${b} tokens`;
}

/** An operation prepared for the search: lease as an index, answer as the search reads it. */
interface SearchOp {
  readonly src: LeaseOp;
  readonly lease: number;
  /** Acquire and hand_off: the token block the grant reserves (1 when none). */
  readonly block: bigint;
  /** Hand_off: the index of the lease it releases; {@link NO_LEASE} otherwise. */
  readonly releaseLease: number;
  readonly outcome: StoreOpOutcome;
  readonly hi: number;
}

interface StepResult {
  readonly next: ModelState[];
  readonly reason?: string;
}

/** All states the model can be in after `op` takes effect in state `s` (none: illegal here). */
function step(s: ModelState, op: SearchOp, names: readonly string[]): StepResult {
  const o = op.src;
  const lo = o.storeLo;
  const hi = op.hi;
  const next: ModelState[] = [];
  const holderName =
    s.holder === NONE
      ? 'nobody'
      : s.holder === PRIOR
        ? 'a holder from before the history'
        : names[s.holder]!;
  const at = (guard: ExpiryGuard, ttl?: number, drop = false) =>
    s.zone.advance(lo, hi, guard, ttl, drop);
  // Why a guarded step failed: the window itself, or the guard.
  const timing = (guard: ExpiryGuard, what: string): string =>
    at('any') === undefined
      ? `its store-time window [${lo}, ${hi}] ends before an operation it must follow took effect`
      : what + (guard === 'live' ? ' (the lease had expired by store time)' : '');
  switch (o.f) {
    case 'acquire': {
      const ttl = o.ttlMs!;
      let reason: string | undefined;
      if (op.outcome === 'acquired' || op.outcome === 'info') {
        // A new grant: the key must be free at T.
        const floor = floorOf(s);
        const tokenOk = op.outcome === 'info' || o.granted! > floor;
        const guard: ExpiryGuard = s.holder === NONE ? 'any' : 'expired';
        if (!tokenOk) {
          reason = notAbove(o.granted!, s);
        } else {
          const z = at(guard, ttl);
          if (z !== undefined)
            next.push(
              op.outcome === 'info'
                ? state(op.lease, floor, false, op.block, z)
                : state(op.lease, o.granted!, true, op.block, z),
            );
          else reason = timing(guard, `the key was held live by ${holderName}`);
        }
      }
      if (op.outcome === 'acquired' && s.holder === op.lease) {
        // An idempotent retry: same token, expiry unchanged.
        if (s.exact ? o.granted === s.token : o.granted! > s.token) {
          const z = at('live');
          if (z !== undefined) next.push(state(s.holder, o.granted!, true, s.block, z));
        } else
          reason ??= `a retry of ${names[op.lease]} got token ${o.granted}, not its own ${s.token}`;
      }
      if (op.outcome === 'busy') {
        if (s.holder === NONE) reason = 'busy, but no lease held the key';
        else if (s.holder === op.lease)
          reason = `busy, but ${holderName} (the asking lease) held the key itself`;
        else {
          const z = at('live');
          if (z !== undefined) next.push(state(s.holder, s.token, s.exact, s.block, z));
          else reason = timing('live', `busy, but ${holderName}'s lease had expired`);
        }
      }
      return next.length > 0 ? { next } : { next, reason: reason ?? 'no legal outcome' };
    }
    case 'hand_off':
      return handOffStep(s, op, names, holderName);
    case 'renew':
    case 'release': {
      const t = o.token!;
      const holds = s.holder === op.lease;
      const canMatch = holds && (s.exact ? s.token === t : t > s.token);
      const canMismatch = !holds || !s.exact || s.token !== t;
      const mismatch = !holds
        ? `${names[op.lease]} did not hold the key (${holderName} did)`
        : `token ${t} is not the holder's token ${s.token}`;
      const effect = o.f === 'renew' ? 'renewed' : 'released';
      if (op.outcome === effect || op.outcome === 'info') {
        if (!canMatch) return { next, reason: `${effect}, but ${mismatch}` };
        // A renewal needs a live lease; a release of one's own expired lease may answer either way.
        const guard: ExpiryGuard = o.f === 'renew' || op.outcome === 'info' ? 'live' : 'any';
        const z = o.f === 'renew' ? at(guard, o.ttlMs) : at(guard, undefined, true);
        if (z === undefined) return { next, reason: timing(guard, `${effect} too late`) };
        next.push(state(o.f === 'renew' ? s.holder : NONE, t, true, s.block, z));
        return { next };
      }
      // lost / not_owner: no change.
      if (canMismatch) {
        const z = at('any');
        if (z !== undefined) next.push(state(s.holder, s.token, s.exact, s.block, z));
      }
      if (canMatch) {
        const z = at('expired');
        if (z !== undefined) next.push(state(s.holder, t, true, s.block, z));
      }
      return next.length > 0
        ? { next }
        : {
            next,
            reason: timing(
              'any',
              `${op.outcome}, but ${names[op.lease]} held the key live with token ${t}`,
            ),
          };
    }
  }
}

/**
 * A hand-off: its release half at some `T` in the window, then its acquire half at that same
 * `T` (the zone pins it). Each half may go more than one way (a release of one's own expired
 * lease may answer either way; an :info one may or may not have released), so every branch
 * whose two halves agree with the answer is a successor.
 */
function handOffStep(
  s: ModelState,
  op: SearchOp,
  names: readonly string[],
  holderName: string,
): StepResult {
  const o = op.src;
  const info = op.outcome === 'info';
  const want = info ? undefined : o.released;
  const rt = o.releaseToken!;
  const ttl = o.ttlMs!;
  const holds = s.holder === op.releaseLease;
  const canMatch = holds && (s.exact ? s.token === rt : rt > s.token);
  const canMismatch = !holds || !s.exact || s.token !== rt;
  // The release half.
  const halves: { readonly s: ModelState; readonly freed: boolean }[] = [];
  if (want !== 'not_owner' && canMatch) {
    const z = s.zone.advance(o.storeLo, op.hi, 'any', undefined, true);
    if (z !== undefined) halves.push({ s: state(NONE, rt, true, s.block, z), freed: true });
  }
  if (want !== 'released') {
    if (canMismatch) {
      const z = s.zone.advance(o.storeLo, op.hi, 'any', undefined, false);
      if (z !== undefined)
        halves.push({ s: state(s.holder, s.token, s.exact, s.block, z), freed: false });
    }
    if (canMatch) {
      const z = s.zone.advance(o.storeLo, op.hi, 'expired', undefined, false);
      if (z !== undefined) halves.push({ s: state(s.holder, rt, true, s.block, z), freed: false });
    }
  }
  if (halves.length === 0) {
    const released = names[op.releaseLease]!;
    return {
      next: [],
      reason:
        want === 'released'
          ? `its release answered released, but ${released} with token ${rt} did not hold the key (${holderName} did${s.holder === op.releaseLease ? ` with token ${s.token}` : ''})`
          : want === 'not_owner'
            ? `its release answered not_owner, but ${released} held the key live with token ${rt}`
            : `its store-time window [${o.storeLo}, ${op.hi}] ends before an operation it must follow took effect`,
    };
  }
  // The acquire half, at the same instant.
  const next: ModelState[] = [];
  let reason: string | undefined;
  for (const h of halves) {
    const r = h.s;
    const same = (guard: ExpiryGuard, renew?: number) =>
      r.zone.advance(-Infinity, Infinity, guard, renew, false, true);
    const name =
      r.holder === NONE
        ? 'nobody'
        : r.holder === PRIOR
          ? 'a holder from before the history'
          : names[r.holder]!;
    if (op.outcome === 'acquired' || op.outcome === 'info') {
      const floor = floorOf(r);
      if (op.outcome === 'acquired' && !(o.granted! > floor)) {
        reason ??= notAbove(o.granted!, r);
      } else {
        const z = same(r.holder === NONE ? 'any' : 'expired', ttl);
        if (z !== undefined)
          next.push(
            info
              ? state(op.lease, floor, false, op.block, z)
              : state(op.lease, o.granted!, true, op.block, z),
          );
        else
          reason ??= `hand-off granted while ${name} held the key live${h.freed ? '' : ` (its release of ${names[op.releaseLease]} did not take effect)`}`;
      }
      // A copy of the same request arriving again (network duplicate): an idempotent retry.
      if (
        op.outcome === 'acquired' &&
        r.holder === op.lease &&
        (r.exact ? o.granted === r.token : o.granted! > r.token)
      ) {
        const z = same('live');
        if (z !== undefined) next.push(state(r.holder, o.granted!, true, r.block, z));
      }
    } else {
      // busy
      if (r.holder === NONE)
        reason ??= h.freed
          ? 'busy, but its own release had just freed the key'
          : 'busy, but no lease held the key';
      else if (r.holder === op.lease)
        reason ??= `busy, but ${name} (the asking lease) held the key itself`;
      else {
        const z = same('live');
        if (z !== undefined) next.push(state(r.holder, r.token, r.exact, r.block, z));
        else reason ??= `busy, but ${name}'s lease had expired`;
      }
    }
  }
  return next.length > 0 ? { next } : { next, reason: reason ?? 'no legal outcome' };
}

// ---------------------------------------------------------------------------------------
// The search

type SearchStatus = 'ok' | 'violated' | 'unknown';

interface SearchOutcome {
  readonly status: SearchStatus;
  readonly steps: number;
  /** Model refusals per operation index (a few distinct reasons each). */
  readonly reasons: Map<number, string[]>;
}

/**
 * WGL over one key's operations. `ops[i].outcome === 'info'` ops may stay out; all others
 * must be linearized.
 */
function search(
  ops: readonly SearchOp[],
  names: readonly string[],
  init: ModelState,
  budget: number,
): SearchOutcome {
  const n = ops.length;
  const reasons = new Map<number, string[]>();
  // Entries: the call of each operation and its return (none for :info), sorted by time, as a
  // doubly linked list over indices; node 0 is the head, node k + 1 is entries[k].
  const entries: { id: number; ret: boolean; t: number }[] = [];
  let required = 0;
  for (let i = 0; i < n; i++) {
    entries.push({ id: i, ret: false, t: ops[i]!.src.invokeT });
    if (ops[i]!.outcome !== 'info') {
      entries.push({ id: i, ret: true, t: ops[i]!.src.completeT });
      required++;
    }
  }
  // Calls before returns at equal times: operations that touch in time count as concurrent.
  entries.sort((a, b) => a.t - b.t || Number(a.ret) - Number(b.ret) || a.id - b.id);
  const size = entries.length + 1;
  const next = new Int32Array(size + 1).fill(-1);
  const prev = new Int32Array(size + 1).fill(-1);
  const callNode = new Int32Array(n);
  const retNode = new Int32Array(n).fill(-1);
  for (let k = 0; k < entries.length; k++) {
    const node = k + 1;
    const e = entries[k]!;
    if (e.ret) retNode[e.id] = node;
    else callNode[e.id] = node;
    prev[node] = node - 1;
    next[node - 1] = node;
  }
  next[entries.length] = -1;
  const isRet = (node: number) => entries[node - 1]!.ret;
  const idOf = (node: number) => entries[node - 1]!.id;
  const unlink = (node: number) => {
    next[prev[node]!] = next[node]!;
    if (next[node]! !== -1) prev[next[node]!] = prev[node]!;
  };
  const relink = (node: number) => {
    next[prev[node]!] = node;
    if (next[node]! !== -1) prev[next[node]!] = node;
  };
  // How many operations not linearized yet name each lease (as theirs, or as the one a
  // hand-off releases). A lease at 0 can never be renewed, released, retried or handed off
  // again: which lease it is no longer matters to the rest of the search.
  const mentionsLeft = new Int32Array(names.length);
  const mention = (i: number, by: number) => {
    const o = ops[i]!;
    mentionsLeft[o.lease]! += by;
    if (o.releaseLease !== NO_LEASE) mentionsLeft[o.releaseLease]! += by;
  };
  for (let i = 0; i < n; i++) mention(i, 1);
  // Lift in order call-then-return, restore in reverse (dancing links).
  const lift = (i: number) => {
    unlink(callNode[i]!);
    if (retNode[i]! !== -1) unlink(retNode[i]!);
    mention(i, -1);
  };
  const unlift = (i: number) => {
    mention(i, 1);
    if (retNode[i]! !== -1) relink(retNode[i]!);
    relink(callNode[i]!);
  };
  // :info operations with the same effect are interchangeable, so only the earliest-invoked
  // unlinearized one of each kind is a candidate (its window contains the others'): any
  // linearization using a later one can use it instead (the exchange keeps every operation
  // inside its window, taking them in invocation order). Same kind: same function, lease, token,
  // TTL and token block — or any acquire of a lease no other operation still to be linearized
  // mentions (a grant nobody can ever renew, release or retry), with the same TTL and token
  // block (the block is part of a grant's effect: it raises the floor); a hand-off is such an
  // acquire too once the lease it releases is neither the holder nor mentioned again (its
  // release can only answer not_owner). Without this, k lost acquires cost k! orders.
  const sameEffect = infoKinds(ops);
  const kindOf = (id: number, holder: number): string => {
    const o = ops[id]!;
    const anonymous =
      mentionsLeft[o.lease] === 1 &&
      (o.src.f === 'acquire' ||
        (o.src.f === 'hand_off' &&
          mentionsLeft[o.releaseLease] === 1 &&
          holder !== o.releaseLease));
    return anonymous ? `anonymous acquire/${o.src.ttlMs}/${o.block}` : sameEffect[id]!;
  };
  const candidates = (at: ModelState): number[] => {
    const holder = at.holder;
    const done: number[] = [];
    const info: number[] = [];
    // Kind → smallest store-time lower bound among the ones kept (list order is invocation
    // order; a later one is dominated only if its store window starts no earlier either).
    const kinds = new Map<string, number>();
    for (let node = next[0]!; node !== -1 && !isRet(node); node = next[node]!) {
      const id = idOf(node);
      const o = ops[id]!;
      if (o.outcome !== 'info') {
        done.push(id);
        continue;
      }
      // An :info renewal or release of token t can never match once a grant above t is
      // linearized (tokens only grow): trying it at every node would only spend the budget.
      if (
        (o.src.f === 'renew' || o.src.f === 'release') &&
        o.src.token! <= at.token &&
        (o.src.token! < at.token || !at.exact)
      )
        continue;
      const kind = kindOf(id, holder);
      const kept = kinds.get(kind);
      if (kept !== undefined && kept <= o.src.storeLo) continue;
      kinds.set(kind, Math.min(kept ?? Infinity, o.src.storeLo));
      info.push(id);
    }
    return info.length === 0 ? done : done.concat(info);
  };

  const bits = new Uint16Array(Math.ceil(n / 16) + 1);
  const bitsKey = () => String.fromCharCode(...bits);
  const seen = new Set<string>();
  interface Frame {
    readonly state: ModelState;
    readonly cands: number[];
    ci: number;
    succ: ModelState[];
    si: number;
    /** The op linearized to reach this frame (-1 at the root). */
    readonly via: number;
  }
  const stack: Frame[] = [
    { state: init, cands: candidates(init), ci: -1, succ: [], si: 0, via: -1 },
  ];
  let left = required;
  let steps = 0;
  const note = (i: number, reason: string) => {
    const list = reasons.get(i) ?? [];
    if (list.length < 3 && !list.includes(reason)) list.push(reason);
    reasons.set(i, list);
  };
  while (stack.length > 0) {
    if (left === 0) return { status: 'ok', steps, reasons };
    const frame = stack[stack.length - 1]!;
    let child: ModelState | undefined;
    let childOp = -1;
    while (child === undefined) {
      if (frame.si < frame.succ.length) {
        child = frame.succ[frame.si++]!;
        childOp = frame.cands[frame.ci]!;
        break;
      }
      frame.ci++;
      if (frame.ci >= frame.cands.length) break;
      if (++steps > budget) return { status: 'unknown', steps, reasons };
      const op = frame.cands[frame.ci]!;
      if (frame.via >= 0 && swappable(ops[frame.via]!, frame.via, ops[op]!, op)) continue;
      const r = step(frame.state, ops[op]!, names);
      if (r.next.length === 0 && r.reason !== undefined) note(op, r.reason);
      frame.succ = r.next;
      frame.si = 0;
    }
    if (child === undefined) {
      // Every candidate tried: backtrack.
      stack.pop();
      if (frame.via >= 0) {
        bits[frame.via >> 4]! &= ~(1 << (frame.via & 15));
        unlift(frame.via);
        if (ops[frame.via]!.outcome !== 'info') left++;
      }
      continue;
    }
    bits[childOp >> 4]! |= 1 << (childOp & 15);
    lift(childOp);
    // States that differ only in which forgotten lease holds the key are the same state. A
    // frame reached by a busy answer also skips some candidates (`swappable`): it is a
    // different node from the same state reached otherwise.
    const forgotten = child.holder >= 0 && mentionsLeft[child.holder] === 0;
    const memo = `${bitsKey()}|${forgotten ? `x/${child.rest}` : child.key}${isBusy(ops[childOp]!) ? `|b${childOp}` : ''}`;
    if (seen.has(memo)) {
      unlift(childOp);
      bits[childOp >> 4]! &= ~(1 << (childOp & 15));
      continue;
    }
    seen.add(memo);
    const cands = candidates(child);
    // Store time never goes back: once the last step is certainly later than the end of a
    // pending completed operation's window, that operation can no longer be linearized. This
    // is what keeps :info operations (window open to +∞) from being tried in every subset at
    // a dead end: an effect that needs a late instant is cut at once.
    const earliest = child.lastAt;
    if (cands.some((c) => ops[c]!.outcome !== 'info' && ops[c]!.hi < earliest)) {
      unlift(childOp);
      bits[childOp >> 4]! &= ~(1 << (childOp & 15));
      continue;
    }
    if (ops[childOp]!.outcome !== 'info') left--;
    stack.push({ state: child, cands, ci: -1, succ: [], si: 0, via: childOp });
  }
  return { status: 'violated', steps, reasons };
}

/** An acquire answered busy: it changes nothing but the store time (the holder was live). */
function isBusy(o: SearchOp): boolean {
  return o.outcome === 'busy' && o.src.f === 'acquire';
}

/**
 * Partial-order reduction: two busy answers linearized back to back commute when the later-
 * invoked one (`last`, index `li`) could have come first — concurrent in real time, and the
 * earlier-invoked one's (`cand`, index `ci`) store window starts no later than `last`'s ends.
 * Any linearization with `last` right before `cand` then has one with them swapped: both
 * need only "holder live at T", and some T in both windows between the neighbours exists
 * (the same instant for both, or one instant in the windows' overlap). So the search keeps
 * adjacent busy answers in invocation order wherever they could be swapped.
 */
function swappable(last: SearchOp, li: number, cand: SearchOp, ci: number): boolean {
  return (
    ci < li &&
    isBusy(last) &&
    isBusy(cand) &&
    cand.src.storeLo <= last.hi &&
    cand.src.invokeT <= last.src.completeT
  );
}

/** For each :info operation, a string naming its effect (see `candidates` in {@link search}). */
function infoKinds(ops: readonly SearchOp[]): string[] {
  const mentions = new Map<number, number>();
  for (const o of ops) {
    mentions.set(o.lease, (mentions.get(o.lease) ?? 0) + 1);
    // A hand-off names the lease it releases too: that lease is not anonymous.
    if (o.releaseLease !== NO_LEASE)
      mentions.set(o.releaseLease, (mentions.get(o.releaseLease) ?? 0) + 1);
  }
  return ops.map((o) => {
    if (o.outcome !== 'info') return '';
    const s = o.src;
    // A grant's effect includes the block it reserves.
    if (s.f === 'acquire' && mentions.get(o.lease) === 1)
      return `anonymous acquire/${s.ttlMs}/${o.block}`;
    if (s.f === 'hand_off')
      return `hand_off/${o.lease}/${o.releaseLease}/${s.releaseToken}/${s.ttlMs}/${o.block}`;
    return `${s.f}/${o.lease}/${s.token}/${s.ttlMs}/${o.block}`;
  });
}

function prepare(list: readonly LeaseOp[], cutoff: number): { ops: SearchOp[]; names: string[] } {
  const leaseIndex = new Map<string, number>();
  const names: string[] = [];
  const ops: SearchOp[] = [];
  const indexOf = (label: string): number => {
    let index = leaseIndex.get(label);
    if (index === undefined) {
      index = names.length;
      names.push(label);
      leaseIndex.set(label, index);
    }
    return index;
  };
  for (const o of list) {
    if (o.invokeT > cutoff) continue;
    const lease = indexOf(o.lease);
    const releaseLease = o.releaseLease === undefined ? NO_LEASE : indexOf(o.releaseLease);
    // Answered after the cutoff: within the prefix it is still pending, so unknown.
    const pending = o.completeT > cutoff;
    ops.push({
      src: o,
      lease,
      block: BigInt(o.tokenBlock),
      releaseLease,
      outcome: pending ? 'info' : o.outcome,
      hi: pending ? Infinity : o.storeHi,
    });
  }
  return { ops, names };
}

function initialState(priorHolder: boolean): ModelState {
  return state(priorHolder ? PRIOR : NONE, 0n, true, 1n, StoreTimeZone.unconstrained());
}

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
