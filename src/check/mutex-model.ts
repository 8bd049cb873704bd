/**
 * The fenced mutex model the linearizability search checks store operations against: one
 * key's state and the steps each operation may take from it (see linearizability.ts for the
 * model in words).
 */
import type { LeaseOp, StoreOpOutcome } from './linearizability.js';
import { type ExpiryGuard, StoreTimeZone } from './time-zone.js';

/** An operation prepared for the search: lease as an index, answer as the search reads it. */
export interface SearchOp {
  readonly src: LeaseOp;
  readonly lease: number;
  /** Acquire and hand_off: the token block the grant reserves (1 when none). */
  readonly block: bigint;
  /** Hand_off: the index of the lease it releases; {@link NO_LEASE} otherwise. */
  readonly releaseLease: number;
  readonly outcome: StoreOpOutcome;
  readonly hi: number;
}

const NONE = -1;

const PRIOR = -2;

/** `SearchOp.releaseLease` of operations that release nothing: matches no holder. */
export const NO_LEASE = -3;

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
export interface ModelState {
  readonly holder: number;
  readonly token: bigint;
  readonly exact: boolean;
  readonly block: bigint;
  readonly zone: StoreTimeZone;
  /**
   * The holder's lock-delay (0 for none): until its expiry plus this, by the store's clock,
   * nobody else is granted the key unless the request skips the delay; a release ends it.
   */
  readonly delay: number;
  readonly key: string;
  /** `key` without the holder (the search may write the holder canonically). */
  readonly rest: string;
  /** The earliest store time the last linearized operation can have taken effect at. */
  readonly lastAt: number;
}

export function state(
  holder: number,
  token: bigint,
  exact: boolean,
  block: bigint,
  zone: StoreTimeZone,
  delay = 0,
): ModelState {
  const rest = `${token}/${exact ? 1 : 0}/${block}/${delay}/${zone.key}`;
  return {
    holder,
    token,
    exact,
    block,
    zone,
    delay,
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

interface StepResult {
  readonly next: ModelState[];
  readonly reason?: string;
}

/** All states the model can be in after `op` takes effect in state `s` (none: illegal here). */
export function step(s: ModelState, op: SearchOp, names: readonly string[]): StepResult {
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
  const at = (guard: ExpiryGuard, ttl?: number, drop = false, delay = 0) =>
    s.zone.advance(lo, hi, guard, ttl, drop, false, delay);
  // Another lease's grant or busy answer goes by the holder's lock-delay, unless skipped.
  const delay = o.ignoreLockDelay ? 0 : s.delay;
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
          const z = at(guard, ttl, false, delay);
          if (z !== undefined)
            next.push(
              op.outcome === 'info'
                ? state(op.lease, floor, false, op.block, z, o.lockDelayMs)
                : state(op.lease, o.granted!, true, op.block, z, o.lockDelayMs),
            );
          else reason = timing(guard, `the key was held live by ${holderName}`);
        }
      }
      if (op.outcome === 'acquired' && s.holder === op.lease) {
        // An idempotent retry: same token, expiry unchanged.
        if (s.exact ? o.granted === s.token : o.granted! > s.token) {
          const z = at('live');
          if (z !== undefined) next.push(state(s.holder, o.granted!, true, s.block, z, s.delay));
        } else
          reason ??= `a retry of ${names[op.lease]} got token ${o.granted}, not its own ${s.token}`;
      }
      if (op.outcome === 'busy') {
        if (s.holder === NONE) reason = 'busy, but no lease held the key';
        else if (s.holder === op.lease)
          reason = `busy, but ${holderName} (the asking lease) held the key itself`;
        else {
          const z = at('live', undefined, false, delay);
          if (z !== undefined) next.push(state(s.holder, s.token, s.exact, s.block, z, s.delay));
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
        next.push(
          o.f === 'renew'
            ? state(s.holder, t, true, s.block, z, s.delay)
            : state(NONE, t, true, s.block, z),
        );
        return { next };
      }
      // lost / not_owner: no change.
      if (canMismatch) {
        const z = at('any');
        if (z !== undefined) next.push(state(s.holder, s.token, s.exact, s.block, z, s.delay));
      }
      if (canMatch) {
        const z = at('expired');
        if (z !== undefined) next.push(state(s.holder, t, true, s.block, z, s.delay));
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
        halves.push({ s: state(s.holder, s.token, s.exact, s.block, z, s.delay), freed: false });
    }
    if (canMatch) {
      const z = s.zone.advance(o.storeLo, op.hi, 'expired', undefined, false);
      if (z !== undefined)
        halves.push({ s: state(s.holder, rt, true, s.block, z, s.delay), freed: false });
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
    const same = (guard: ExpiryGuard, renew?: number, delay = 0) =>
      r.zone.advance(-Infinity, Infinity, guard, renew, false, true, delay);
    const delay = o.ignoreLockDelay ? 0 : r.delay;
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
        const z = same(r.holder === NONE ? 'any' : 'expired', ttl, delay);
        if (z !== undefined)
          next.push(
            info
              ? state(op.lease, floor, false, op.block, z, o.lockDelayMs)
              : state(op.lease, o.granted!, true, op.block, z, o.lockDelayMs),
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
        if (z !== undefined) next.push(state(r.holder, o.granted!, true, r.block, z, r.delay));
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
        const z = same('live', undefined, delay);
        if (z !== undefined) next.push(state(r.holder, r.token, r.exact, r.block, z, r.delay));
        else reason ??= `busy, but ${name}'s lease had expired`;
      }
    }
  }
  return next.length > 0 ? { next } : { next, reason: reason ?? 'no legal outcome' };
}

// ---------------------------------------------------------------------------------------
// The search

/** An acquire answered busy: it changes nothing but the store time (the holder was live). */
export function isBusy(o: SearchOp): boolean {
  return o.outcome === 'busy' && o.src.f === 'acquire';
}

export function initialState(priorHolder: boolean): ModelState {
  return state(priorHolder ? PRIOR : NONE, 0n, true, 1n, StoreTimeZone.unconstrained());
}
