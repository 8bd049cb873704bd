/**
 * Glossary.
 * - key: the name of the thing one owner at a time may act on (`report/july`).
 * - owner id: who asked — a readable identity (`host/pid/…`), for holders' info and logs.
 *   Two processes may share one; it never decides ownership.
 * - lease id: one acquisition, a random UUID chosen by the client before it asks. Renew and
 *   release must present it; it is never shown to other parties in full.
 * - token: the fencing token of one acquisition — a positive 64-bit integer, greater than
 *   every token granted before for the same key. Carried as `bigint`, as a decimal string
 *   on the wire.
 * - deadline: the local, conservative end of a lease on the client's monotonic clock.
 */

/** A fencing token: positive, 64-bit, strictly increasing per key across grants. */
export type Token = bigint;

/** What an observer may learn about the current holder of a key. */
export interface HolderInfo {
  readonly ownerId: string;
  readonly token: Token;
  /** Remaining lease time by the store's clock, when the store answered. */
  readonly remainingMs: number;
  /** The first 8 characters of the lease id: enough for logs, not enough to act. */
  readonly leaseIdPrefix: string;
  /** The holder's optional value (≤ 1 KiB), e.g. a leader's address. */
  readonly value: string | undefined;
}

/** A key's state as a store reports it to observers. */
export interface LeaseState {
  readonly key: string;
  /** The highest token ever granted for the key (0n when never granted). */
  readonly lastToken: Token;
  /** The live holder, or undefined when the key is free, released or expired. */
  readonly holder: HolderInfo | undefined;
}

/** How a store decides expiry. */
export type TimeAuthority =
  /** The store server's clock (`clock_timestamp()`, Redis `TIME`, etcd lease TTL). */
  | 'store'
  /** This machine's monotonic clock, shared by every process on it (embedded SQLite). */
  | 'machine_monotonic'
  /** A clock injected into the store (memory store, simulation). */
  | 'injected';

/** What survives a crash of the store: how far token monotonicity can be trusted. */
export type TokenDurability =
  /** Tokens are lost with the process (memory store). */
  | 'volatile'
  /** Tokens are on local disk before they are returned (fsync'd commit). */
  | 'durable'
  /** Tokens are committed by a replicated quorum before they are returned. */
  | 'replicated'
  /** Tokens can go backwards on failover unless the store's epoch floor catches it. */
  | 'best_effort';

/** What a store can do; the client adapts to capabilities, never to store names. */
export interface StoreCapabilities {
  readonly timeAuthority: TimeAuthority;
  readonly tokenDurability: TokenDurability;
  /** `push` when {@link LeaseStore.watch} is woken by the store on change; `none` otherwise. */
  readonly watch: 'push' | 'none';
  /** Whether several processes (or machines) may share one store safely. */
  readonly sharedAcrossProcesses: boolean;
  /** The smallest TTL the store honours; the client refuses shorter ones. */
  readonly minTtlMs: number;
  /** TTLs are rounded up to a multiple of this at the store (1 for ms-precise stores). */
  readonly ttlGranularityMs: number;
  /**
   * The store honours {@link StoreAcquireRequest.tokenBlock}: a grant can reserve the tokens
   * after its own for the client's local successors (decision 007). Absent means no.
   */
  readonly tokenBlocks?: boolean;
  /**
   * The store honours {@link StoreAcquireRequest.lockDelayMs} and `ignoreLockDelay`: a key
   * whose holder expired stays ungrantable for the delay. Absent means no.
   */
  readonly lockDelay?: boolean;
  /**
   * How much longer than its TTL a key may stay taken at the store after its holder's last
   * renewal, by the store's design (etcd: the session headroom plus the leader's 500 ms expiry
   * check). Liveness only: the key is never free earlier than the TTL. Absent means 0.
   */
  readonly expiryLagMs?: number;
  /**
   * Whose clock the `expiresAtWallMs` of this store's answers is on. `store`: the store's own
   * (PostgreSQL `clock_timestamp()`, Redis `TIME`, the machine clock SQLite decides by).
   * `client`: the store states no expiry instant — etcd answers a lease TTL in whole seconds,
   * counted on its leader's clock — so the figure is the client's wall clock when the answer
   * arrived, plus the TTL: an observation, not the store's clock. Absent means `store`.
   */
  readonly expiryObservedBy?: 'store' | 'client';
}
