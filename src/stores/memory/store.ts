import type { Clock } from '../../core/runtime/clock.js';
import { LeaseholdError } from '../../core/errors.js';
import { leaseIdPrefix } from '../../core/ids.js';
import { compareBytes, utf8 } from '../../core/platform.js';
import { LIMITS } from '../../core/validate.js';
import type {
  HandOffLeaseStore,
  StoreHandOffResult,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
} from '../../core/store.js';
import type { HolderInfo, LeaseState, StoreCapabilities } from '../../core/types.js';
import { resolveMemoryStoreOptions, type MemoryLeaseStoreOptions } from './options.js';
import type { MemoryLeaseState, Row } from './state.js';

// Importers of this module (the simulation, tests) take the state from here too.
export { MemoryLeaseState } from './state.js';

const CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'injected',
  tokenDurability: 'volatile',
  watch: 'push',
  sharedAcrossProcesses: false,
  minTtlMs: 1,
  ttlGranularityMs: 1,
  tokenBlocks: true,
  lockDelay: true,
});

/**
 * An in-process lease store: the reference implementation of the contract, for simulation
 * and for your own unit tests. Expiry is decided by the injected clock, so a `ManualClock`
 * drives it in virtual time. Nothing survives the process, and nothing is shared with other
 * processes — use `SqliteLeaseStore` for that.
 *
 * @example
 * const clock = new ManualClock();
 * const store = new MemoryLeaseStore({ clock });
 * const client = new LeaseClient({ store, clock });
 */
export class MemoryLeaseStore implements HandOffLeaseStore {
  readonly kind = 'memory';
  readonly capabilities = CAPABILITIES;
  private readonly clock: Clock;
  private readonly state: MemoryLeaseState;
  private closed = false;

  constructor(options: MemoryLeaseStoreOptions = {}) {
    const resolved = resolveMemoryStoreOptions(options);
    this.clock = resolved.clock;
    this.state = resolved.state;
  }

  tryAcquire(
    request: StoreAcquireRequest,
    _options?: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.assertOpen();
    const now = this.clock.now();
    const row = this.state.rows.get(request.key);
    if (row !== undefined && row.leaseId !== undefined && row.expiresAt > now) {
      if (row.leaseId === request.leaseId)
        return Promise.resolve({ status: 'acquired', token: row.lastToken });
      return Promise.resolve({
        status: 'busy',
        holder: holderOf(row, now),
        retryAfterMs: row.expiresAt - now,
      });
    }
    // The last holder expired (a release clears leaseId): its lock-delay still shuts the key.
    if (row?.leaseId !== undefined && request.ignoreLockDelay !== true) {
      const delayEnd = row.expiresAt + (row.lockDelayMs ?? 0);
      if (delayEnd > now) {
        return Promise.resolve({
          status: 'busy',
          holder: holderOf(row, now),
          retryAfterMs: delayEnd - now,
          reason: 'lock_delay',
        });
      }
    }
    const token = (row?.topToken ?? 0n) + 1n;
    const top = token + BigInt((request.tokenBlock ?? 1) - 1);
    if (top > LIMITS.maxToken) {
      throw new LeaseholdError('ERR_UNAVAILABLE', `token space of ${request.key} is exhausted`);
    }
    this.state.rows.set(request.key, {
      lastToken: token,
      topToken: top,
      leaseId: request.leaseId,
      ownerId: request.ownerId,
      expiresAt: now + request.ttlMs,
      value: request.value,
      ...(request.lockDelayMs === undefined ? {} : { lockDelayMs: request.lockDelayMs }),
    });
    this.notify(request.key);
    return Promise.resolve({ status: 'acquired', token });
  }

  renew(
    lease: StoreLeaseRef & { ttlMs: number },
    _options?: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.assertOpen();
    const now = this.clock.now();
    const row = this.state.rows.get(lease.key);
    if (row === undefined || !owns(row, lease) || row.expiresAt <= now)
      return Promise.resolve({ status: 'lost' });
    row.expiresAt = now + lease.ttlMs;
    return Promise.resolve({ status: 'renewed' });
  }

  release(lease: StoreLeaseRef, _options?: StoreRequestOptions): Promise<StoreReleaseResult> {
    this.assertOpen();
    const row = this.state.rows.get(lease.key);
    if (row === undefined || !owns(row, lease)) return Promise.resolve({ status: 'not_owner' });
    row.leaseId = undefined;
    row.ownerId = undefined;
    row.value = undefined;
    row.expiresAt = Number.NEGATIVE_INFINITY;
    this.notify(lease.key);
    return Promise.resolve({ status: 'released' });
  }

  /** {@link HandOffLeaseStore}: release, then an acquire attempt, with nothing in between. */
  async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    // Both calls run synchronously up to their returned promise: nothing can come between.
    const released = this.release(release, options);
    const acquired = this.tryAcquire(acquire, options);
    return { released: (await released).status, acquired: await acquired };
  }

  inspect(key: string, _options?: StoreRequestOptions): Promise<LeaseState> {
    this.assertOpen();
    return Promise.resolve(stateOf(key, this.state.rows.get(key), this.clock.now()));
  }

  list(prefix: string, limit: number, _options?: StoreRequestOptions): Promise<LeaseState[]> {
    this.assertOpen();
    const now = this.clock.now();
    const out: LeaseState[] = [];
    for (const key of [...this.state.rows.keys()]
      .filter((k) => k.startsWith(prefix))
      .sort(compareKeys)) {
      const s = stateOf(key, this.state.rows.get(key), now);
      if (s.holder !== undefined) out.push(s);
      if (out.length >= limit) break;
    }
    return Promise.resolve(out);
  }

  watch(key: string, onChange: () => void): Promise<Unwatch> {
    this.assertOpen();
    return Promise.resolve(this.state.watchers.add(key, () => queueMicrotask(() => onChange())));
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  private notify(key: string): void {
    // Deliver after the current operation completes, as a real store's notification would.
    this.state.watchers.released(key);
  }

  private assertOpen(): void {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the memory lease store was closed');
  }
}

function owns(row: Row, lease: StoreLeaseRef): boolean {
  return row.leaseId === lease.leaseId && row.lastToken === lease.token;
}

function holderOf(row: Row, now: number): HolderInfo {
  return {
    ownerId: row.ownerId ?? '',
    token: row.lastToken,
    remainingMs: Math.max(0, row.expiresAt - now),
    leaseIdPrefix: leaseIdPrefix(row.leaseId ?? ''),
    value: row.value,
  };
}

function stateOf(key: string, row: Row | undefined, now: number): LeaseState {
  if (row === undefined) return { key, lastToken: 0n, holder: undefined };
  const live = row.leaseId !== undefined && row.expiresAt > now;
  return { key, lastToken: row.topToken, holder: live ? holderOf(row, now) : undefined };
}

/** Orders keys by UTF-8 bytes, the order SQL stores use. */
export function compareKeys(a: string, b: string): number {
  return compareBytes(utf8(a), utf8(b));
}
