import type { LeaseStore } from '../core/store.js';

interface Tracked {
  readonly token: bigint;
  /** The full lease id, to recognise the holder's own renewal (never logged or published). */
  readonly leaseId: string;
  readonly ownerId: string;
  readonly leaseIdPrefix: string;
  readonly grantedAt: number;
  expiresAt: number;
}

/** What the tracker reports when a lease it knew ended without a release through this server. */
export interface ExpiredLease {
  readonly key: string;
  readonly token: bigint;
  readonly ownerId: string;
  readonly leaseIdPrefix: string;
  readonly heldMs: number;
}

/** Options for {@link ExpiryTracker}. */
export interface ExpiryTrackerOptions {
  readonly store: LeaseStore;
  /** Called once per lease found gone at the store. */
  readonly onExpired: (lease: ExpiredLease) => void;
  /** How often to look. Defaults to 250 ms. */
  readonly intervalMs?: number;
  /** At most this many leases are tracked; beyond it, expiries are not reported. Defaults to 100 000. */
  readonly maxTracked?: number;
  /** At most this many store reads per sweep. Defaults to 64. */
  readonly maxChecksPerSweep?: number;
  readonly requestTimeoutMs?: number;
}

/**
 * Notices, best effort, that a lease granted through this server has run out without a
 * release: after its expected expiry it reads the key, and if the store no longer has that
 * token live, reports it. Expiry is still decided by the store; this only observes it. Leases
 * renewed or released through another server are re-read, not misreported.
 */
export class ExpiryTracker {
  private readonly leases = new Map<string, Tracked>();
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly maxTracked: number;
  private readonly maxChecks: number;
  private readonly timeoutMs: number;
  private sweeping = false;

  constructor(private readonly options: ExpiryTrackerOptions) {
    this.maxTracked = options.maxTracked ?? 100_000;
    this.maxChecks = options.maxChecksPerSweep ?? 64;
    this.timeoutMs = options.requestTimeoutMs ?? 5000;
    this.timer = setInterval(() => void this.sweep(), options.intervalMs ?? 250);
    this.timer.unref();
  }

  /** How many leases are tracked. */
  get size(): number {
    return this.leases.size;
  }

  /** Starts tracking a lease granted through this server (replaces an older one on the key). */
  granted(
    key: string,
    token: bigint,
    ownerId: string,
    leaseId: string,
    leaseIdPrefix: string,
    ttlMs: number,
  ): void {
    if (this.leases.size >= this.maxTracked && !this.leases.has(key)) return;
    const now = performance.now();
    this.leases.set(key, {
      token,
      leaseId,
      ownerId,
      leaseIdPrefix,
      grantedAt: now,
      expiresAt: now + ttlMs,
    });
  }

  /** Whether this very lease (key, token and lease id) is tracked: a grant already seen here. */
  knows(key: string, token: bigint, leaseId: string): boolean {
    const t = this.leases.get(key);
    return t !== undefined && t.token === token && t.leaseId === leaseId;
  }

  /** Moves the expected expiry of a tracked lease after a renewal through this server. */
  renewed(key: string, token: bigint, ttlMs: number): void {
    const t = this.leases.get(key);
    if (t !== undefined && t.token === token) t.expiresAt = performance.now() + ttlMs;
  }

  /** Forgets the lease and returns how long it was held, if it was tracked. */
  ended(key: string, token: bigint): number | undefined {
    const t = this.leases.get(key);
    if (t === undefined || t.token !== token) return undefined;
    this.leases.delete(key);
    return performance.now() - t.grantedAt;
  }

  /**
   * Forgets the lease and returns how long it was held, only if it is the tracked lease with
   * this very lease id and token: a refused renewal with anyone else's lease id or token says
   * nothing about the tracked lease (that is how an event could be injected).
   */
  lost(key: string, token: bigint, leaseId: string): number | undefined {
    const t = this.leases.get(key);
    if (t === undefined || t.token !== token || t.leaseId !== leaseId) return undefined;
    return this.ended(key, token);
  }

  /** Stops sweeping and forgets every lease. */
  stop(): void {
    clearInterval(this.timer);
    this.leases.clear();
  }

  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = performance.now();
      const due = [...this.leases].filter(([, t]) => t.expiresAt <= now).slice(0, this.maxChecks);
      for (const [key, t] of due) {
        let state;
        try {
          state = await this.options.store.inspect(key, {
            timeoutMs: this.timeoutMs,
            signal: AbortSignal.timeout(this.timeoutMs),
          });
        } catch {
          return; // store unreachable: try again next sweep
        }
        if (this.leases.get(key) !== t) continue;
        if (state.holder !== undefined && state.holder.token === t.token) {
          t.expiresAt = performance.now() + Math.max(1, state.holder.remainingMs);
          continue;
        }
        this.leases.delete(key);
        this.options.onExpired({
          key,
          token: t.token,
          ownerId: t.ownerId,
          leaseIdPrefix: t.leaseIdPrefix,
          heldMs: performance.now() - t.grantedAt,
        });
      }
    } finally {
      this.sweeping = false;
    }
  }
}
