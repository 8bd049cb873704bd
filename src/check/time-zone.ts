/**
 * What a linearization may still assume about the store's clock, as a zone: difference
 * bounds (a DBM, as in timed-automata checkers) over three quantities — the constant 0,
 * `L`, the store time at which the last linearized operation took effect, and `E`, the
 * current holder's expiry. Every constraint the lease model produces has the form
 * `x − y ≤ c` or `x − y < c` (an operation's store-time window, "store time never goes
 * back", "live: T < E", "free: E ≤ T", "E = T + ttl"), so a zone represents the set of
 * store-time assignments exactly, and dropping a variable (projection) stays exact once the
 * matrix is closed. This is what lets the checker choose *when* in its window each operation
 * took effect without enumerating instants.
 */

/** A condition on the current holder's expiry at the instant `T` an operation takes effect. */
export type ExpiryGuard = 'any' | 'live' | 'expired';

const INF = Number.POSITIVE_INFINITY;
/** Variables of the stored 3×3 matrix; the working 4×4 matrix adds T (the new operation). */
const ZERO = 0;
const L = 1;
const E = 2;
const T = 3;
const WORK_V = new Float64Array(16);
const WORK_S = new Uint8Array(16);

/**
 * An immutable, closed (canonical) zone over {0, L, E}. `key` identifies it exactly, for
 * memoisation. Bounds are value + strictness: `(c, false)` is `x − y ≤ c`, `(c, true)` is
 * `x − y < c`.
 */
export class StoreTimeZone {
  private constructor(
    private readonly v: Float64Array,
    private readonly s: Uint8Array,
    readonly key: string,
  ) {}

  /** No operation yet: store time and expiry unconstrained. */
  static unconstrained(): StoreTimeZone {
    const v = new Float64Array(9).fill(INF);
    const s = new Uint8Array(9);
    for (let i = 0; i < 3; i++) v[i * 3 + i] = 0;
    return StoreTimeZone.of(v, s);
  }

  private static of(v: Float64Array, s: Uint8Array): StoreTimeZone {
    let key = '';
    for (let i = 0; i < 9; i++) {
      if (i % 4 === 0) continue;
      key += `${v[i]}${s[i] === 1 ? '<' : ''},`;
    }
    return new StoreTimeZone(v, s, key);
  }

  /**
   * The zone after an operation takes effect at some store time `T` with `lo ≤ T ≤ hi` and
   * `T ≥ L` (the store's clock does not go back between operations it performs in order),
   * provided `guard` holds at `T`. `renewTtlMs` sets the expiry to `T + ttl` (grant, renew);
   * `dropExpiry` forgets it (no holder). `atLast` pins `T = L`: the second half of one atomic
   * step (a hand-off's grant happens at the instant of its release). `delayMs` moves the
   * guard's edge to `E + delayMs` (a key's lock-delay after an expiry: `live` then means
   * "before the delay ends", `expired` "after it"). Returns undefined when no such `T` exists.
   */
  advance(
    lo: number,
    hi: number,
    guard: ExpiryGuard,
    renewTtlMs: number | undefined,
    dropExpiry: boolean,
    atLast = false,
    delayMs = 0,
  ): StoreTimeZone | undefined {
    if (!(lo <= hi)) return undefined;
    // The working matrix is scratch space (the search is single-threaded and never re-enters).
    const v = WORK_V.fill(INF);
    const s = WORK_S.fill(0);
    for (let i = 0; i < 3; i++)
      for (let j = 0; j < 3; j++) {
        v[i * 4 + j] = this.v[i * 3 + j]!;
        s[i * 4 + j] = this.s[i * 3 + j]!;
      }
    v[T * 4 + T] = 0;
    tighten(v, s, T, ZERO, hi, false); // T − 0 ≤ hi
    tighten(v, s, ZERO, T, -lo, false); // 0 − T ≤ −lo
    tighten(v, s, L, T, 0, false); // L − T ≤ 0
    if (atLast) tighten(v, s, T, L, 0, false); // T − L ≤ 0
    // A lock-delay D moves the guard's edge from E to E + D (still a difference bound).
    if (guard === 'live')
      tighten(v, s, T, E, delayMs, true); // T − E < D
    else if (guard === 'expired') tighten(v, s, E, T, -delayMs, false); // E − T ≤ −D
    if (!close(v, s)) return undefined;

    // Project onto {0, L' = T, E'}: L's old value is no longer needed once T ≥ L is folded in.
    const rv = new Float64Array(9).fill(INF);
    const rs = new Uint8Array(9);
    for (let i = 0; i < 3; i++) rv[i * 3 + i] = 0;
    const put = (i: number, j: number, fi: number, fj: number): void => {
      rv[i * 3 + j] = v[fi * 4 + fj]!;
      rs[i * 3 + j] = s[fi * 4 + fj]!;
    };
    put(ZERO, L, ZERO, T);
    put(L, ZERO, T, ZERO);
    if (renewTtlMs !== undefined) {
      // E' = T + ttl exactly: its bounds are T's, shifted.
      rv[L * 3 + E] = -renewTtlMs;
      rv[E * 3 + L] = renewTtlMs;
      rv[E * 3 + ZERO] = v[T * 4 + ZERO]! + renewTtlMs;
      rs[E * 3 + ZERO] = s[T * 4 + ZERO]!;
      rv[ZERO * 3 + E] = v[ZERO * 4 + T]! - renewTtlMs;
      rs[ZERO * 3 + E] = s[ZERO * 4 + T]!;
    } else if (!dropExpiry) {
      put(ZERO, E, ZERO, E);
      put(E, ZERO, E, ZERO);
      put(L, E, T, E);
      put(E, L, E, T);
    }
    return StoreTimeZone.of(rv, rs);
  }

  /** `[min, max]` of the last operation's store time, for counterexample text. */
  lastAt(): readonly [number, number] {
    return [-this.v[ZERO * 3 + L]!, this.v[L * 3 + ZERO]!];
  }

  /** `[min, max]` of the holder's expiry (unbounded when there is no holder). */
  expiry(): readonly [number, number] {
    return [-this.v[ZERO * 3 + E]!, this.v[E * 3 + ZERO]!];
  }
}

/** Bound a < b in the (value, strict) order, where (c, <) is tighter than (c, ≤). */
function less(va: number, sa: number, vb: number, sb: number): boolean {
  return va < vb || (va === vb && sa === 1 && sb === 0);
}

function tighten(v: Float64Array, s: Uint8Array, i: number, j: number, c: number, strict: boolean) {
  const st = strict ? 1 : 0;
  if (less(c, st, v[i * 4 + j]!, s[i * 4 + j]!)) {
    v[i * 4 + j] = c;
    s[i * 4 + j] = st;
  }
}

/** Floyd–Warshall closure of the 4×4 matrix; false when the zone is empty (negative cycle). */
function close(v: Float64Array, s: Uint8Array): boolean {
  for (let k = 0; k < 4; k++)
    for (let i = 0; i < 4; i++) {
      const vik = v[i * 4 + k]!;
      if (vik === INF) continue;
      const sik = s[i * 4 + k]!;
      for (let j = 0; j < 4; j++) {
        const vkj = v[k * 4 + j]!;
        if (vkj === INF) continue;
        const sum = vik + vkj;
        const ss = sik | s[k * 4 + j]!;
        if (less(sum, ss, v[i * 4 + j]!, s[i * 4 + j]!)) {
          v[i * 4 + j] = sum;
          s[i * 4 + j] = ss;
        }
      }
    }
  for (let i = 0; i < 4; i++) if (less(v[i * 4 + i]!, s[i * 4 + i]!, 0, 0)) return false;
  return true;
}
