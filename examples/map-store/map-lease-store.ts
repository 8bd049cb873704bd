// A third-party LeaseStore over a JavaScript Map: the smallest store that passes leasehold's
// store contract (docs/store-contract.md walks through it). One process only: the Map is the
// "database", shared by every store instance opened over the same MapLeaseBook.
import { LeaseholdError } from 'leasehold';
import type {
  HolderInfo,
  LeaseState,
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreCapabilities,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  Unwatch,
} from 'leasehold';

interface Row {
  token: bigint;
  leaseId: string | undefined;
  ownerId: string;
  value: string | undefined;
  /** By this process's monotonic clock: the store's clock. */
  expiresAt: number;
}

/** The data behind every MapLeaseStore opened over it (what a database file would be). */
export class MapLeaseBook {
  readonly rows = new Map<string, Row>();
  readonly watchers = new Map<string, Set<() => void>>();
}

export class MapLeaseStore implements LeaseStore {
  readonly kind = 'map';
  readonly capabilities: StoreCapabilities = {
    timeAuthority: 'machine_monotonic',
    tokenDurability: 'volatile',
    watch: 'push',
    sharedAcrossProcesses: false,
    minTtlMs: 1,
    ttlGranularityMs: 1,
  };
  private closed = false;

  constructor(private readonly book: MapLeaseBook) {}

  tryAcquire(req: StoreAcquireRequest): Promise<StoreAcquireResult> {
    this.open();
    const now = performance.now();
    const row = this.book.rows.get(req.key);
    if (row?.leaseId !== undefined && row.expiresAt > now) {
      // A retry of the same acquisition gets the same token; anyone else is told who holds it.
      if (row.leaseId === req.leaseId)
        return Promise.resolve({ status: 'acquired', token: row.token });
      return Promise.resolve({
        status: 'busy',
        holder: holder(row, now),
        retryAfterMs: row.expiresAt - now,
      });
    }
    const token = (row?.token ?? 0n) + 1n;
    this.book.rows.set(req.key, {
      token,
      leaseId: req.leaseId,
      ownerId: req.ownerId,
      value: req.value,
      expiresAt: now + req.ttlMs,
    });
    this.notify(req.key);
    return Promise.resolve({ status: 'acquired', token });
  }

  renew(lease: StoreLeaseRef & { ttlMs: number }): Promise<StoreRenewResult> {
    this.open();
    const now = performance.now();
    const row = this.book.rows.get(lease.key);
    if (row === undefined || !owns(row, lease) || row.expiresAt <= now)
      return Promise.resolve({ status: 'lost' });
    row.expiresAt = now + lease.ttlMs;
    return Promise.resolve({ status: 'renewed' });
  }

  release(lease: StoreLeaseRef): Promise<StoreReleaseResult> {
    this.open();
    const row = this.book.rows.get(lease.key);
    if (row === undefined || !owns(row, lease)) return Promise.resolve({ status: 'not_owner' });
    // The row stays: its token is where the next grant counts from.
    row.leaseId = undefined;
    row.value = undefined;
    this.notify(lease.key);
    return Promise.resolve({ status: 'released' });
  }

  inspect(key: string): Promise<LeaseState> {
    this.open();
    return Promise.resolve(state(key, this.book.rows.get(key), performance.now()));
  }

  list(prefix: string, limit: number): Promise<LeaseState[]> {
    this.open();
    const now = performance.now();
    const keys = [...this.book.rows.keys()].filter((k) => k.startsWith(prefix));
    // Key order by UTF-8 bytes, as SQL stores sort.
    keys.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    return Promise.resolve(
      keys
        .map((k) => state(k, this.book.rows.get(k), now))
        .filter((s) => s.holder !== undefined)
        .slice(0, limit),
    );
  }

  watch(key: string, onChange: () => void): Promise<Unwatch> {
    this.open();
    const set = this.book.watchers.get(key) ?? new Set();
    this.book.watchers.set(key, set);
    const fn = () => onChange();
    set.add(fn);
    return Promise.resolve(() => void set.delete(fn));
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  private notify(key: string): void {
    // After the operation, as a real store's notification arrives.
    for (const fn of this.book.watchers.get(key) ?? []) queueMicrotask(fn);
  }

  private open(): void {
    // A closed store must fail its callers, who then report `unavailable` (never `busy`).
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the map store was closed');
  }
}

function owns(row: Row, lease: StoreLeaseRef): boolean {
  return row.leaseId === lease.leaseId && row.token === lease.token;
}

function holder(row: Row, now: number): HolderInfo {
  return {
    ownerId: row.ownerId,
    token: row.token,
    remainingMs: Math.max(0, row.expiresAt - now),
    leaseIdPrefix: (row.leaseId ?? '').slice(0, 8),
    value: row.value,
  };
}

function state(key: string, row: Row | undefined, now: number): LeaseState {
  const live = row?.leaseId !== undefined && row.expiresAt > now;
  return { key, lastToken: row?.token ?? 0n, holder: live ? holder(row, now) : undefined };
}
