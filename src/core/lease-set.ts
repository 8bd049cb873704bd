import type { AcquireOptionsWithoutFences } from './client-options.js';
import { invalidArgument } from './errors.js';
import type { Lease } from './lease.js';
import type { AcquireResult, LossReason, ReleaseResult } from './results.js';
import type { HolderInfo, Token } from './types.js';
import { validatePlainKey, validateWait } from './validate.js';

// Several keys at once (decision 046): the keys are taken one after the other in one total
// order (sorted by UTF-16 code units), so two callers whose sets overlap never wait for each
// other in a cycle; on any refusal the keys already held are released in reverse order, so a
// set is all or none. Each member is an ordinary lease: it renews on its own (batched
// renewals already group a client's renewals per store call), and losing one loses the set.

/** The most keys one {@link LeaseClient.acquireAll} takes. */
export const MAX_SET_KEYS = 64;

/** Options of {@link LeaseClient.acquireAll}: those of `acquire` without `fences`. */
export type AcquireAllOptions = AcquireOptionsWithoutFences;

/** The outcome of {@link LeaseClient.acquireAll}. Expected outcomes are values, not errors. */
export type AcquireAllResult =
  | { readonly status: 'acquired'; readonly leases: LeaseSet; readonly waitedMs: number }
  /** `wait` was 0 and `key` was held (or in its lock-delay): nothing is held. */
  | ({ readonly status: 'busy' } & BlockedBy)
  /** `key` was still held when the set's one deadline passed: nothing is held. */
  | ({ readonly status: 'timeout'; readonly waitedMs: number } & BlockedBy)
  /** The store could not answer for `key`: nothing is held (or it expires on its own). */
  | { readonly status: 'unavailable'; readonly key: string; readonly cause: unknown };

/** The key that kept a set from being taken, and what the store said about it. */
export interface BlockedBy {
  /** The first key, in the set's sorted order, that could not be taken. */
  readonly key: string;
  readonly holder: HolderInfo;
  readonly retryAfterMs: number;
  readonly reason?: 'held' | 'lock_delay';
}

/** The outcome of {@link LeaseSet.release}. */
export type LeaseSetReleaseResult =
  | { readonly status: 'released' }
  /** Some member was not released cleanly; each member's answer, by key. */
  | { readonly status: 'partial'; readonly results: ReadonlyMap<string, ReleaseResult> };

/** The outcome of {@link LeaseClient.withLeases}. */
export type WithLeasesResult<T> =
  | { readonly status: 'completed'; readonly value: T; readonly tokens: ReadonlyMap<string, Token> }
  /** `fn` returned, but a member was lost while it ran: its unfenced effects may be stale. */
  | {
      readonly status: 'lost';
      readonly value: T;
      readonly tokens: ReadonlyMap<string, Token>;
      readonly key: string;
      readonly reason: LossReason;
    }
  | Exclude<AcquireAllResult, { status: 'acquired' }>;

/** The body {@link LeaseClient.withLeases} runs holding the set. */
export type SetBody<T> = (leases: LeaseSet, signal: AbortSignal) => Promise<T> | T;

/** What acquireAll needs of the client: one key's acquisition and its clock. */
export interface KeyAcquirer {
  acquire(key: string, options: AcquireOptionsWithoutFences): Promise<AcquireResult>;
  now(): number;
}

/**
 * Leases on several keys held as one: valid while every member is. Its `signal` fires when
 * any member is lost (the others are then released: a set is never half-held on purpose) or
 * when the set is released. Fence each key's writes with its own token (`tokens.get(key)`).
 */
export class LeaseSet {
  /** The set's keys, in the order they were taken (sorted by UTF-16 code units). */
  readonly keys: readonly string[];
  /** Each key's token: fence writes to what a key guards with that key's token. */
  readonly tokens: ReadonlyMap<string, Token>;
  /** Each key's lease. */
  readonly leases: ReadonlyMap<string, Lease>;
  private readonly controller = new AbortController();
  private ended: { key: string; reason: LossReason } | undefined;
  private releasing: Promise<LeaseSetReleaseResult> | undefined;

  /** Made by `acquireAll`: `members` in the order they were taken. */
  constructor(members: readonly Lease[]) {
    this.keys = members.map((l) => l.key);
    this.leases = new Map(members.map((l) => [l.key, l]));
    this.tokens = new Map(members.map((l) => [l.key, l.token]));
    for (const lease of members) {
      const onEnd = (): void => this.memberEnded(lease);
      if (lease.signal.aborted) onEnd();
      else lease.signal.addEventListener('abort', onEnd, { once: true });
    }
  }

  /** Fires when any member is lost, or when the set is released. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** `held` until a member is lost (`lost`) or the set is released (`released`). */
  get status(): 'held' | 'lost' | 'released' {
    if (this.ended === undefined) return 'held';
    return this.ended.reason === 'released' ? 'released' : 'lost';
  }

  /** The member whose end ended the set, and why; undefined while held. */
  get lostKey(): { readonly key: string; readonly reason: LossReason } | undefined {
    return this.ended;
  }

  /** The earliest local deadline of the members: the set is valid until then at most. */
  get deadline(): number {
    let min = Infinity;
    for (const lease of this.leases.values()) min = Math.min(min, lease.deadline);
    return min;
  }

  /** Milliseconds of validity left: the least of the members' (0 once lost or released). */
  remainingMs(): number {
    if (this.ended !== undefined) return 0;
    let min = Infinity;
    for (const lease of this.leases.values()) min = Math.min(min, lease.remainingMs());
    return this.ended === undefined ? min : 0;
  }

  /** True while every member is held and before its deadline. */
  isValid(): boolean {
    return this.remainingMs() > 0;
  }

  /** Releases every member, in reverse order of taking. Safe to call more than once. */
  release(): Promise<LeaseSetReleaseResult> {
    this.releasing ??= this.releaseAll();
    return this.releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  private async releaseAll(): Promise<LeaseSetReleaseResult> {
    this.end(this.keys[0]!, 'released');
    const results = await releaseReverse([...this.leases.values()]);
    if ([...results.values()].every((r) => r.status === 'released')) return { status: 'released' };
    return { status: 'partial', results };
  }

  private memberEnded(lease: Lease): void {
    if (this.ended !== undefined) return;
    this.end(lease.key, lease.lossReason ?? 'lost');
    // Losing one loses the set: free the others now rather than at their expiry.
    void this.release();
  }

  private end(key: string, reason: LossReason): void {
    if (this.ended !== undefined) return;
    this.ended = { key, reason };
    this.controller.abort(new Error(`lease set ended: ${key} ${reason}`));
  }
}

/** Checks a set of keys: an array of 1 to {@link MAX_SET_KEYS} distinct plain keys, sorted. */
export function validateKeySet(value: unknown): string[] {
  if (!Array.isArray(value)) throw invalidArgument('keys', 'must be an array of keys', value);
  if (value.length === 0) throw invalidArgument('keys', 'must name at least one key', value);
  if (value.length > MAX_SET_KEYS) {
    throw invalidArgument('keys', `must name at most ${MAX_SET_KEYS} keys`, value.length);
  }
  const keys = value.map((k, i) => validatePlainKey(k, `keys[${i}]`));
  // Default sort compares UTF-16 code units: one total order every caller agrees on.
  keys.sort();
  for (let i = 1; i < keys.length; i++) {
    if (keys[i] === keys[i - 1]) throw invalidArgument('keys', 'must not repeat a key', keys[i]);
  }
  return keys;
}

/**
 * Takes every key of the set or none: in sorted order, each waiting only for what is left of
 * the set's one deadline; on the first refusal (or a throw, e.g. an abort) releases the keys
 * already taken in reverse order and answers which key blocked.
 */
export async function acquireAll(
  client: KeyAcquirer,
  keys: unknown,
  options: AcquireAllOptions,
): Promise<AcquireAllResult> {
  const sorted = validateKeySet(keys);
  if ((options as { fences?: unknown } | undefined)?.fences !== undefined) {
    throw invalidArgument('fences', 'is not taken by acquireAll: claim per key', 'fences');
  }
  const waitMs = validateWait(options?.wait);
  const startedAt = client.now();
  const until = startedAt + waitMs;
  const held: Lease[] = [];
  try {
    for (const key of sorted) {
      const wait = Math.max(0, Math.ceil(until - client.now()));
      const r = await client.acquire(key, { ...options, wait });
      if (r.status === 'acquired') {
        held.push(r.lease);
        continue;
      }
      await releaseReverse(held.splice(0));
      if (r.status === 'unavailable') return { status: 'unavailable', key, cause: r.cause };
      const blocked: BlockedBy = {
        key,
        holder: r.holder,
        retryAfterMs: r.retryAfterMs,
        ...(r.reason !== undefined ? { reason: r.reason } : {}),
      };
      if (waitMs === 0) return { status: 'busy', ...blocked };
      return { status: 'timeout', waitedMs: client.now() - startedAt, ...blocked };
    }
  } catch (err) {
    await releaseReverse(held.splice(0));
    throw err;
  }
  return { status: 'acquired', leases: new LeaseSet(held), waitedMs: client.now() - startedAt };
}

/** Releases leases one after the other, last taken first; each one's answer by key. */
async function releaseReverse(leases: readonly Lease[]): Promise<Map<string, ReleaseResult>> {
  const results = new Map<string, ReleaseResult>();
  for (let i = leases.length - 1; i >= 0; i--) {
    const lease = leases[i]!;
    results.set(lease.key, await lease.release());
  }
  return results;
}

/**
 * Runs `fn` holding every key of the set ({@link acquireAll}), then releases them all in
 * every outcome. `fn`'s signal fires when any member is lost or the caller's signal aborts.
 */
export async function withLeases<T>(
  client: KeyAcquirer,
  keys: readonly string[],
  options: AcquireAllOptions,
  fn: SetBody<T>,
): Promise<WithLeasesResult<T>> {
  const acquired = await acquireAll(client, keys, options);
  if (acquired.status !== 'acquired') return acquired;
  const set = acquired.leases;
  const signal = options.signal ? AbortSignal.any([set.signal, options.signal]) : set.signal;
  try {
    const value = await fn(set, signal);
    if (set.isValid()) return { status: 'completed', value, tokens: set.tokens };
    const lost = set.lostKey ?? { key: set.keys[0]!, reason: 'expired' as const };
    return { status: 'lost', value, tokens: set.tokens, key: lost.key, reason: lost.reason };
  } finally {
    await set.release();
  }
}
