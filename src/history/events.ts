/**
 * The history format: one JSON object per line, written by the simulation, by the
 * real-process fault tests, and by anyone's own system, and read by the checker
 * (`leasehold check history.jsonl`). docs/history-format.md is the reference.
 *
 * Times (`t`, `at`, `grantedAt`, `expiresAt`, `deadline`) are milliseconds on ONE time scale
 * per history (the harness's clock); an emitter that cannot put a value on that scale leaves
 * it out, and the checks that need it report "not checked". Tokens are decimal strings.
 */

/** An operation on a lease, as the client invoked it and saw its outcome. */
export type ClientOpType = 'acquire' | 'renew' | 'release';

/** Phases of a client operation: `invoke` first, then exactly one outcome (or none: `:info`). */
export type ClientPhase =
  'invoke' | 'ok' | 'busy' | 'unavailable' | 'lost' | 'not_owner' | 'released';

/** A client-side lease operation event. */
export interface ClientEvent {
  readonly type: ClientOpType;
  readonly phase: ClientPhase;
  /** Harness time of the event. */
  readonly t: number;
  /** Who did it (a process, worker or client name). */
  readonly proc: string;
  /** Pairs `invoke` with its outcome; unique per operation in the history. */
  readonly op: string;
  readonly key: string;
  /** The lease's token (decimal string), on `ok` and on renew/release. */
  readonly token?: string;
  /** A label for the lease (any stable id; never needs to be the secret lease id). */
  readonly lease?: string;
  readonly ttlMs?: number;
  /** The client's own conservative deadline for the lease after this event (harness scale). */
  readonly deadline?: number;
  /** The store's expiry for the lease as the store reported it (harness scale), if known. */
  readonly storeExpiresAt?: number;
  /**
   * `client` when `storeExpiresAt` is the client's own observation (its clock when the answer
   * arrived, plus the TTL) because the store states no expiry instant (etcd). Absent: the
   * store's clock.
   */
  readonly storeExpiryObservedBy?: 'client';
  /**
   * A slot acquisition (`acquireSlot`): the semaphore's limit it asked for. The `invoke` names
   * the semaphore in `key`; the `ok` names the slot's key (`name#slot=i`) it got. I10 counts
   * the valid holders of a semaphore's slots against the largest limit asked for.
   */
  readonly limit?: number;
  /**
   * A member of a set taken as one (`acquireAll`), on the member's `acquire ok`: a label of
   * the set's acquisition (one per set), and every key of the set. I11 reads them.
   */
  readonly set?: string;
  readonly setKeys?: readonly string[];
}

/** What the store itself did, observed at the store (simulation, or a store that reports it). */
export interface StoreEvent {
  readonly type: 'store';
  readonly op: string;
  readonly action: 'grant' | 'busy' | 'renewed' | 'renew_lost' | 'released' | 'not_owner';
  /** Store time of the action (harness scale). */
  readonly at: number;
  readonly t: number;
  readonly key: string;
  readonly lease?: string;
  readonly token?: string;
  /** The lease's expiry after the action (grant, renewed). */
  readonly expiresAt?: number;
  /**
   * The action was part of a hand-off (`releaseAndAcquire`): its release and its grant are
   * recorded as two events at the same store instant, the release first.
   */
  readonly handOff?: boolean;
  /** On a grant: the lock-delay the grant asked for (ms after an end by expiry). I12 reads it. */
  readonly lockDelayMs?: number;
  /** On a grant: the acquisition skipped the key's lock-delay (its writes are fenced). */
  readonly ignoreLockDelay?: boolean;
}

/**
 * The store operations a lease model knows (I5). `hand_off` is `releaseAndAcquire`: a release
 * and an acquire attempt of the same key in one atomic step.
 */
export type StoreOpFunction = 'acquire' | 'renew' | 'release' | 'hand_off';

/**
 * Phases of a store operation: `invoke`, then one answer — acquire and hand_off `acquired` /
 * `busy`, renew `renewed` / `lost`, release `released` / `not_owner` — or `info` (timeout,
 * store unavailable: it may or may not have taken effect). No answer at all is also `info`.
 */
export type StoreOpPhase =
  'invoke' | 'acquired' | 'busy' | 'renewed' | 'lost' | 'released' | 'not_owner' | 'info';

/**
 * One request to the lease store as its caller sent it and saw it answered (I5, the W-mutex
 * shape): a single atomic step at the store, unlike the client's `acquire` events, which
 * cover waiting and retries. The linearizability check reads these.
 */
export interface StoreOpEvent {
  readonly type: 'store_op';
  readonly phase: StoreOpPhase;
  readonly f: StoreOpFunction;
  /** Harness time of the event: the request sent (`invoke`), its answer read (others). */
  readonly t: number;
  readonly proc: string;
  /** Pairs `invoke` with its answer; unique per operation in the history. */
  readonly op: string;
  readonly key: string;
  /**
   * The acquisition's label: the lease id the request carries (required on `invoke`). For a
   * hand_off, the lease it grants.
   */
  readonly lease?: string;
  /** Renew/release `invoke`: the token the request carries. `acquired`: the token granted. */
  readonly token?: string;
  /** Acquire/renew `invoke`: the TTL asked for. */
  readonly ttlMs?: number;
  /**
   * The store's own clock (the one it decides expiry by) at this event, on the history's
   * scale: on `invoke` a lower bound, on the answer an upper bound, of the store time at which
   * the operation took effect.
   */
  readonly storeAt?: number;
  /** On `info`: what went wrong. */
  readonly error?: string;
  /** Hand_off `invoke`: the label of the lease it releases. */
  readonly releaseLease?: string;
  /** Hand_off `invoke`: the token of the lease it releases. */
  readonly releaseToken?: string;
  /** Hand_off answer (`acquired` / `busy`): what its release did. */
  readonly released?: 'released' | 'not_owner';
  /**
   * Acquire and hand_off `invoke`: the token block the request asked for
   * (`StoreAcquireRequest.tokenBlock`, decision 007), an integer from 2 to 64; absent means 1.
   * A grant of token `t` with block `b` keeps `t` as the holder's token and makes every later
   * grant for the key greater than `t + b − 1`.
   */
  readonly tokenBlock?: number;
  /**
   * Acquire and hand_off `invoke`: the lock-delay the grant asks for (ms after an end by
   * expiry during which the store grants the key to nobody, a release ending it early).
   */
  readonly lockDelayMs?: number;
  /** Acquire and hand_off `invoke`: the request skips the key's lock-delay. */
  readonly ignoreLockDelay?: boolean;
}

/** A client's lease ended on its side (signal fired). */
export interface LostEvent {
  readonly type: 'lost';
  readonly t: number;
  readonly proc: string;
  readonly key: string;
  readonly token: string;
  readonly lease?: string;
  readonly reason: string;
}

/** A fenced write at the protected resource, as the client sent it and saw it answered. */
export interface WriteEvent {
  readonly type: 'write';
  readonly phase: 'invoke' | 'ok' | 'stale' | 'duplicate' | 'unknown';
  readonly t: number;
  readonly proc: string;
  readonly op: string;
  /** The fencing scope at the resource. */
  readonly resource: string;
  readonly token: string;
  /** What the write adds (for the lost-write check, I6). */
  readonly value?: string;
  /** False when the write was sent without a token check (the unfenced control arm). */
  readonly fenced?: boolean;
}

/** What the resource did with a write, observed at the resource. */
export interface ResourceEvent {
  readonly type: 'resource';
  readonly action: 'applied' | 'rejected' | 'duplicate';
  readonly t: number;
  readonly op: string;
  readonly resource: string;
  readonly token: string;
  /** The high-water mark after the action. */
  readonly hwm?: string;
}

/**
 * A claim at the protected resource (claim before start: a new owner installs its token with
 * no write before it starts), observed at the resource, in the resource's commit order with
 * its `resource` events. `applied`: the mark is now at least the token; `stale_fence`: a newer
 * token had claimed or written, nothing changed (the owner must not start).
 */
export interface ClaimEvent {
  readonly type: 'claim';
  readonly action: 'applied' | 'stale_fence';
  readonly t: number;
  /** Who claimed, when known. */
  readonly proc?: string;
  /** The fencing scope at the resource. */
  readonly resource: string;
  readonly token: string;
  /** The high-water mark after the claim. */
  readonly hwm?: string;
}

/** The resource's final contents, read after the run (for I6). */
export interface FinalEvent {
  readonly type: 'final';
  readonly t: number;
  readonly resource: string;
  readonly values: readonly string[];
  readonly hwm?: string;
}

/** A fault the harness injected; some make I3/I4 failures expected. */
export interface FaultEvent {
  readonly type: 'fault';
  readonly t: number;
  readonly fault: string;
  readonly proc?: string;
  readonly detail?: string;
}

/** Run metadata; optional, at most one, usually first. */
export interface MetaEvent {
  readonly type: 'meta';
  readonly t?: number;
  readonly version: 1;
  readonly source?: string;
  readonly seed?: string;
  readonly ttlMs?: number;
  /** Enables the liveness check: a waiting acquirer gets a free key within this bound. */
  readonly livenessBoundMs?: number;
  /**
   * How far store-side times may be off (ms), e.g. when the store's expiry is reported as a
   * wall-clock approximation of a monotonic deadline. Overlaps and slack within it are not
   * violations.
   */
  readonly timeToleranceMs?: number;
  readonly scenario?: string;
  /**
   * Store operations without `storeAt` take their store-time window from `t`: right when the
   * store's clock runs at the rate of the history's clock (any fixed offset is fine: the lease
   * model compares only differences of store times).
   */
  readonly storeTimeFromT?: boolean;
}

/** One line of a history. */
export type HistoryEvent =
  | ClientEvent
  | StoreEvent
  | StoreOpEvent
  | LostEvent
  | WriteEvent
  | ResourceEvent
  | ClaimEvent
  | FinalEvent
  | FaultEvent
  | MetaEvent;
