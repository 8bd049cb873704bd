import type { StoreRenewRequest } from '../../core/store.js';
import type { SqliteDatabase, SqliteStatement } from './client.js';
import type { RestoreGuard } from './epoch.js';
import { exhaustedError } from './errors.js';
import { isLive, type LeaseRow } from './lease-row.js';
import * as Q from './queries.js';

/** Named parameters of a statement (`@key`, `@leaseId` …). */
export type Params = Record<string, unknown>;

/** RENEW_BY_POSITION's parameters, in order (queries.ts). */
type RenewPositions = [
  expiresUs: bigint,
  expiresWallMs: number,
  key: string,
  leaseId: string,
  token: bigint,
  bootId: string,
  nowUs: bigint,
];

/** What {@link LeaseTransactions.renewMany} renews: each lease for its own TTL from `nowUs`. */
export interface RenewManyParams {
  readonly leases: readonly StoreRenewRequest[];
  readonly bootId: string;
  /** The store's time (machine monotonic, µs), read once for the whole call. */
  readonly nowUs: bigint;
  /** Wall-clock now in ms, for the display-only expiry. */
  readonly wallMs: number;
}

/** The store's prepared statements (queries.ts), for one lease table. */
export interface LeaseStatements {
  readonly select: SqliteStatement<[{ key: string }], LeaseRow>;
  readonly acquire: SqliteStatement<[Params], { token: bigint }>;
  readonly renew: SqliteStatement<[Params]>;
  readonly renewByPosition: SqliteStatement<RenewPositions>;
  readonly release: SqliteStatement<[Params]>;
  readonly list: SqliteStatement<[Params], LeaseRow & { key: string }>;
}

/** A release and a grant of the same key in one transaction (a hand-off). */
export interface HandOffParams {
  readonly key: string;
  readonly nowUs: bigint;
  readonly release: Params;
  readonly acquire: Params;
}

/** What a hand-off did: whether it released, and the grant or the holder that kept it. */
export interface HandOffOutcome {
  readonly released: boolean;
  readonly granted: { token: bigint } | undefined;
  /** The live holder that kept the grant from happening (read in the same transaction). */
  readonly holder: LeaseRow | undefined;
}

/** The statements and the write transactions built on them. */
export interface LeaseTransactions {
  readonly stmt: LeaseStatements;
  /** Wraps `fn` in an IMMEDIATE transaction (see {@link prepareLeaseTransactions}). */
  readonly immediate: <A, R>(fn: (a: A) => R) => (a: A) => R;
  readonly acquire: (params: Params) => { token: bigint } | undefined;
  /** Several renewals in one transaction: each one's changed-row count, in order. */
  readonly renewMany: (params: RenewManyParams) => number[];
  readonly release: (params: Params) => number;
  readonly handOff: (params: HandOffParams) => HandOffOutcome;
}

/**
 * Prepares the statements of the lease table `table` and the transactions that write it.
 * With `groupCommit` the connection stays at `synchronous = NORMAL` (the store sets it); without,
 * renewals and releases switch to NORMAL for their commit and back to FULL.
 */
export function prepareLeaseTransactions(
  db: SqliteDatabase,
  table: string,
  guard: RestoreGuard,
  bootId: string,
  groupCommit: boolean,
): LeaseTransactions {
  const sql = (text: string): string =>
    text.replaceAll('{{table}}', `"${table}"`).replaceAll('{{epoch}}', `"${table}_epoch"`);
  const stmt: LeaseStatements = {
    select: db.prepare(sql(Q.SELECT_LEASE)),
    acquire: db.prepare(sql(Q.ACQUIRE)),
    renew: db.prepare(sql(Q.RENEW)),
    renewByPosition: db.prepare(sql(Q.RENEW_BY_POSITION)),
    release: db.prepare(sql(Q.RELEASE)),
    list: db.prepare(sql(Q.LIST_LIVE)),
  };
  // Writes run in IMMEDIATE transactions: the write lock is taken (waiting on the busy
  // handler) before anything is read. An autocommit write would start as a reader and fail
  // at once with SQLITE_BUSY when another process commits in between (a stale WAL snapshot
  // cannot be upgraded, and the busy handler is not consulted for that).
  const { acquire, release } = stmt;
  const immediate = <A, R>(fn: (a: A) => R): ((a: A) => R) => {
    const tx = db.transaction(fn);
    return (a: A) => tx.immediate(a);
  };
  // Only a grant must reach the disk before it is answered: a token lost in a power cut
  // could be handed out again. A lost renewal or release cannot hurt anyone — after a power
  // cut the boot id changes and every lease of the old boot counts as expired — and process
  // crashes keep committed pages in the OS cache either way. So renew and release commit
  // without an fsync (NORMAL; the next FULL commit syncs the WAL up to and including them).
  // With group commit the connection is NORMAL throughout: nothing to switch. (Preparing
  // `PRAGMA synchronous` already sets it, so these statements must not be made then.)
  const relaxed = <A, R>(fn: (a: A) => R): ((a: A) => R) => {
    const run = immediate(fn);
    if (groupCommit) return run;
    const toNormal = db.prepare('PRAGMA synchronous = NORMAL');
    const toFull = db.prepare('PRAGMA synchronous = FULL');
    return (a: A) => {
      toNormal.run();
      try {
        return run(a);
      } finally {
        toFull.run();
      }
    };
  };
  return {
    stmt,
    immediate,
    acquire: immediate((p: Params) => {
      guard.check();
      return acquire.get(p);
    }),
    // A hand-off grants, so it commits with the grants' FULL sync (with group commit: it waits
    // for the WAL sync before answering).
    handOff: immediate((p: HandOffParams): HandOffOutcome => {
      guard.check();
      const released = release.run(p.release).changes === 1;
      const granted = acquire.get(p.acquire);
      const holder = granted === undefined ? stmt.select.get({ key: p.key }) : undefined;
      // Under the write lock the grant fails only for a live holder or an exhausted token
      // space; the latter throws, which rolls the release back too (nothing written).
      if (granted === undefined && (holder === undefined || !isLive(holder, p.nowUs, bootId))) {
        throw exhaustedError(p.key);
      }
      return { released, granted, holder };
    }),
    renewMany: relaxed(({ leases, bootId, nowUs, wallMs }: RenewManyParams): number[] => {
      const { renewByPosition } = stmt;
      const changes = new Array<number>(leases.length);
      // The expiry as a bigint, made once per TTL rather than once per lease (a call's leases
      // nearly always share one TTL).
      let ttlMs = Number.NaN;
      let expiresUs = 0n;
      for (let i = 0; i < leases.length; i++) {
        const lease = leases[i]!;
        if (lease.ttlMs !== ttlMs) {
          ttlMs = lease.ttlMs;
          expiresUs = nowUs + BigInt(ttlMs) * 1000n;
        }
        changes[i] = renewByPosition.run(
          expiresUs,
          wallMs + ttlMs,
          lease.key,
          lease.leaseId,
          lease.token,
          bootId,
          nowUs,
        ).changes;
      }
      return changes;
    }),
    release: relaxed((p: Params) => release.run(p).changes),
  };
}
