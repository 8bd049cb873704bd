import { abortReason, delay, systemClock, type Clock, type TimerHandle } from './runtime/clock.js';
import type { AcquireOptionsWithoutFences, LeaseClient } from './client.js';
import type { FenceClaim } from './fence-claim.js';
import type { ClaimFailedResult } from './results.js';
import { parseDuration, type Duration } from './duration.js';
import { invalidArgument, isLeaseholdError } from './errors.js';
import { requireObject } from './runtime/options.js';
import type { Unwatch } from './store.js';
import type { HolderInfo, LeaseState, Token } from './types.js';
import { Leadership } from './leadership.js';

export { Leadership } from './leadership.js';
import { checkSignal, LIMITS, validateKey, validateValue, validateWait } from './validate.js';

/** The defaults of {@link ElectionOptions} and of {@link Election.observe}. */
const ELECTION_DEFAULTS = Object.freeze({
  stepDown: 'deadline' as const,
  observePollMs: 2000,
});

/** Options for {@link Election}. */
export interface ElectionOptions {
  /** The lease client candidates and observers use (any store). */
  readonly client: LeaseClient;
  /** The election's name; its lease key is `election/NAME`. */
  readonly name: string;
  /** The leader's lease TTL: how long a crashed leader blocks the next one. Required. */
  readonly ttl: Duration;
  /** Renewal cadence while leading, below the TTL. Defaults to a third of the TTL. */
  readonly renewEvery?: Duration;
  /**
   * When a leader steps down: `'deadline'` when its lease's local deadline passes without a
   * confirmed renewal (the lease's signal), or `'first_failure'` at the first renewal that
   * fails, earlier and more conservative. Defaults to `'deadline'`.
   */
  readonly stepDown?: 'deadline' | 'first_failure';
  /** Timers for observers; use the client's clock. Defaults to the system clock. */
  readonly clock?: Clock;
}

/** Options for one {@link Election.campaign}. */
export interface CampaignOptions {
  /** The leader's value, readable by followers (≤ 1 KiB), e.g. its address. Defaults to none. */
  readonly value?: string;
  /**
   * How long to wait to be elected. Defaults to waiting until elected or `signal` aborts
   * (in bounded waits of at most 24 h each).
   */
  readonly wait?: Duration;
  /** Cancels the campaign (throws `ERR_ABORTED`). */
  readonly signal?: AbortSignal;
  /**
   * Fences the new leader claims its epoch on before the campaign answers `elected` (claim
   * before start, as `acquire(key, { fences })`): once elected, an older leader's writes are
   * refused there even before the new leader's first write. A scope defaults to the
   * election's key (`election/NAME`). Defaults to none.
   */
  readonly fences?: readonly FenceClaim[];
}

/** The outcome of {@link Election.campaign}. */
export type CampaignResult =
  | { readonly status: 'elected'; readonly leadership: Leadership }
  /** The wait ended with another leader in office. */
  | { readonly status: 'busy'; readonly leader: HolderInfo }
  /** The wait ended while the store could not be reached. */
  | { readonly status: 'unavailable'; readonly cause: unknown }
  /**
   * Elected, but a fence of `fences` refused the epoch (a newer leader claimed or wrote
   * there: this one is already superseded) or could not be reached; the leadership was
   * resigned. Definitive for `stale_fence`; campaign again for `unavailable`.
   */
  | ClaimFailedResult;

/** What observers know about an election at one moment. */
export interface LeaderView {
  /** The leader in office, or undefined when there is none (resigned, expired, never elected). */
  readonly leader:
    | {
        readonly ownerId: string;
        /** The leader's epoch: its lease's fencing token. Strictly increases across leaders. */
        readonly epoch: Token;
        readonly value: string | undefined;
        /** Its remaining lease time by the store's clock when observed. */
        readonly remainingMs: number;
      }
    | undefined;
  /** The highest epoch ever granted in this election (0n before the first leader). */
  readonly lastEpoch: Token;
}

/** A running {@link Election.observe}. */
export interface Observation extends Disposable {
  /** The latest view delivered to the callback. */
  readonly current: LeaderView;
  /** Stops observing (no more callbacks). Safe to call more than once. */
  stop(): void;
}

const ELECTION_PREFIX = 'election/';

/**
 * Leader election on any lease store: an election is a lease on `election/NAME` whose fencing
 * token is the leader's epoch. Built only on {@link LeaseClient} and the store contract, so it
 * behaves the same on memory, SQLite, PostgreSQL, Redis, etcd and HTTP stores.
 *
 * - `campaign` waits to lead and returns a {@link Leadership} with `epoch`, `signal` and `resign()`.
 * - `observe` reports the leader, its epoch and value, pushed on change (store watch, then a
 *   fresh `inspect`), with an expiry timer and a poll as backstops.
 * - Step-down: a leader whose renewals fail loses its signal at its local deadline, before
 *   the store's expiry lets a follower in (or at the first failure with `stepDown: 'first_failure'`).
 *
 * @example
 * const election = new Election({ client, name: 'scheduler', ttl: '10s' });
 * const r = await election.campaign({ value: 'http://10.0.0.7:8080', signal: shutdown });
 * if (r.status === 'elected') {
 *   const { leadership } = r;
 *   while (!leadership.signal.aborted) {
 *     await runTick({ epoch: leadership.epoch, signal: leadership.signal }); // fenced writes
 *   }
 * }
 */
export class Election {
  /** The election's name. */
  readonly name: string;
  /** Its lease key: `election/NAME`. */
  readonly key: string;
  private readonly client: LeaseClient;
  private readonly ttl: Duration;
  private readonly renewEvery: Duration | undefined;
  private readonly stepDown: 'deadline' | 'first_failure';
  private readonly clock: Clock;

  constructor(options: ElectionOptions) {
    requireObject(options);
    if (options.client === undefined || typeof options.client.acquire !== 'function')
      throw invalidArgument('client', 'must be a LeaseClient', options.client);
    if (typeof options.name !== 'string' || options.name.length === 0)
      throw invalidArgument('name', 'must be a non-empty string', options.name);
    this.key = validateKey(`${ELECTION_PREFIX}${options.name}`, 'name');
    this.name = options.name;
    this.client = options.client;
    if (options.ttl === undefined) throw invalidArgument('ttl', 'is required', options.ttl);
    parseDuration('ttl', options.ttl);
    this.ttl = options.ttl;
    this.renewEvery = options.renewEvery;
    const stepDown = options.stepDown ?? ELECTION_DEFAULTS.stepDown;
    if (stepDown !== 'deadline' && stepDown !== 'first_failure')
      throw invalidArgument('stepDown', "must be 'deadline' or 'first_failure'", stepDown);
    this.stepDown = stepDown;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Waits to lead. Resolves `elected` with a {@link Leadership}; `busy` or `unavailable` only
   * when `wait` was given and ran out. Retries an unreachable store until then (backing off
   * up to 1 s). Throws `ERR_ABORTED` when `signal` fires, `ERR_INVALID_ARGUMENT` for bad
   * options (including a TTL the store cannot honour).
   */
  async campaign(options: CampaignOptions = {}): Promise<CampaignResult> {
    const value = validateValue(options.value);
    const signal = checkSignal(options.signal);
    const waitMs =
      options.wait === undefined ? Number.POSITIVE_INFINITY : validateWait(options.wait);
    const startedAt = this.clock.now();
    let backoffMs = 50;
    for (;;) {
      const left = startedAt + waitMs - this.clock.now();
      const acquireOptions: AcquireOptionsWithoutFences = {
        ttl: this.ttl,
        wait: Math.max(0, Math.floor(Math.min(left, LIMITS.maxWaitMs))),
        value,
        signal,
        ...(this.renewEvery === undefined ? {} : { renewEvery: this.renewEvery }),
      };
      const r =
        options.fences === undefined
          ? await this.client.acquire(this.key, acquireOptions)
          : await this.client.acquire(this.key, { ...acquireOptions, fences: options.fences });
      switch (r.status) {
        case 'claim_failed':
          return r;
        case 'acquired':
          return {
            status: 'elected',
            leadership: new Leadership(this.name, r.lease, this.client, this.stepDown),
          };
        case 'busy':
          if (this.clock.now() - startedAt >= waitMs) return { status: 'busy', leader: r.holder };
          break;
        case 'unavailable': {
          const remaining = startedAt + waitMs - this.clock.now();
          if (remaining <= 0) return r;
          try {
            await delay(this.clock, Math.min(backoffMs, remaining), signal);
          } catch {
            throw abortReason(signal!);
          }
          backoffMs = Math.min(1000, backoffMs * 2);
          break;
        }
      }
    }
  }

  /** The current leader, epoch and value, read once. Throws `ERR_UNAVAILABLE` if the store cannot answer. */
  async leader(): Promise<LeaderView> {
    return viewOf(await this.client.inspect(this.key));
  }

  /**
   * Observes the election: calls `onChange` with the current view once observing has begun,
   * then whenever the leader, its epoch or its value changes — pushed by the store's watch,
   * checked again when the leader's lease would expire, and polled every `pollInterval` as a
   * backstop (default 2 s; also how expiries are seen on stores without push). Store errors
   * are retried at the poll interval; the view stays the last one known.
   */
  async observe(
    onChange: (view: LeaderView) => void,
    options: { readonly pollInterval?: Duration; readonly signal?: AbortSignal } = {},
  ): Promise<Observation> {
    const pollMs =
      options.pollInterval === undefined
        ? ELECTION_DEFAULTS.observePollMs
        : parseDuration('pollInterval', options.pollInterval);
    if (pollMs < 10)
      throw invalidArgument('pollInterval', 'must be at least 10ms', options.pollInterval);
    const signal = checkSignal(options.signal);
    let current: LeaderView = { leader: undefined, lastEpoch: 0n };
    let delivered = false;
    let stopped = false;
    let running = false;
    let again = false;
    let timer: TimerHandle | undefined;
    let unwatch: Unwatch | undefined;

    const schedule = (ms: number): void => {
      if (stopped) return;
      if (timer !== undefined) this.clock.clearTimeout(timer);
      timer = this.clock.setTimeout(
        () => {
          timer = undefined;
          void refresh();
        },
        Math.max(1, Math.min(ms, pollMs)),
        { background: true },
      );
    };
    const refresh = async (): Promise<void> => {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        do {
          again = false;
          let state: LeaseState;
          try {
            state = await this.client.inspect(this.key);
          } catch (err) {
            if (isLeaseholdError(err, 'ERR_CLOSED')) {
              stop();
              return;
            }
            schedule(pollMs);
            return;
          }
          if (stopped) return;
          const view = viewOf(state);
          if (!delivered || changed(current, view)) {
            delivered = true;
            current = view;
            onChange(view);
          } else {
            current = view;
          }
          // Re-check just after the leader's lease would expire, in case nobody tells us.
          schedule(view.leader === undefined ? pollMs : view.leader.remainingMs + 5);
        } while (again && !stopped);
      } finally {
        running = false;
      }
    };
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      if (timer !== undefined) this.clock.clearTimeout(timer);
      timer = undefined;
      unwatch?.();
      signal?.removeEventListener('abort', stop);
    };
    signal?.addEventListener('abort', stop, { once: true });
    try {
      unwatch = await this.client.store.watch(this.key, () => void refresh(), { observer: true });
    } catch {
      // No push: the expiry timer and the poll still find every change.
    }
    if (stopped) unwatch?.();
    await refresh();
    return {
      get current() {
        return current;
      },
      stop,
      [Symbol.dispose]: stop,
    };
  }
}

function viewOf(state: LeaseState): LeaderView {
  const h = state.holder;
  return {
    leader:
      h === undefined
        ? undefined
        : { ownerId: h.ownerId, epoch: h.token, value: h.value, remainingMs: h.remainingMs },
    lastEpoch: state.lastToken,
  };
}

function changed(a: LeaderView, b: LeaderView): boolean {
  if (a.leader === undefined || b.leader === undefined) return a.leader !== b.leader;
  return (
    a.leader.epoch !== b.leader.epoch ||
    a.leader.ownerId !== b.leader.ownerId ||
    a.leader.value !== b.leader.value
  );
}
