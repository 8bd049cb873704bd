// Many leases held by one client, swept over sizes: what each renewal interval costs in store
// round trips and client CPU, memory per lease, an extra client's acquire latency at that size,
// and (after the holder stops renewing, as a crashed process would) how long until every key is
// granted again.
import { randomBytes } from 'node:crypto';
import { LeaseClient } from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import {
  isBatchRenewingLeaseStore,
  type BatchRenewingLeaseStore,
  type LeaseStore,
  type StoreLeaseRef,
  type StoreReleaseResult,
  type StoreRenewRequest,
  type StoreRenewResult,
  type StoreRequestOptions,
} from '../src/core/store.js';
import { CountingLeaseStore } from '../src/testing/counting-store.js';
import { ForwardingLeaseStore } from '../src/testing/forwarding-store.js';
import { percentile, type BenchResult } from './lib.js';

/** The leases' TTL in the sweep (the issue's figure: 30 s) and the client's default interval. */
export const SCALE_TTL_MS = 30_000;
export const SCALE_EVERY_MS = SCALE_TTL_MS / 3;
/** Acquisitions in flight while the holder takes its leases. */
const IN_FLIGHT = 128;

/**
 * The holder's store: once `crash()` is called, every later renewal and release stays
 * unanswered, as with a process that stopped. A `CountingLeaseStore` in front counts the
 * renewal calls as in the renewals bench.
 */
class CrashableStore extends ForwardingLeaseStore {
  private crashed = false;
  private readonly never = new Promise<never>(() => undefined);
  declare readonly renewMany?: BatchRenewingLeaseStore['renewMany'];

  constructor(inner: LeaseStore) {
    super(inner);
    if (isBatchRenewingLeaseStore(inner)) {
      const renewMany: BatchRenewingLeaseStore['renewMany'] = (l, o) =>
        this.crashed ? this.never : inner.renewMany(l, o);
      Object.defineProperty(this, 'renewMany', { value: renewMany, enumerable: false });
    }
  }
  crash(): void {
    this.crashed = true;
  }
  override renew(l: StoreRenewRequest, o: StoreRequestOptions): Promise<StoreRenewResult> {
    return this.crashed ? this.never : super.renew(l, o);
  }
  override release(l: StoreLeaseRef, o: StoreRequestOptions): Promise<StoreReleaseResult> {
    return this.crashed ? this.never : super.release(l, o);
  }
  override close(): Promise<void> {
    return Promise.resolve(); // the suite closes the inner store
  }
}

/** What one size of the sweep measured. */
export interface HeldFigures {
  readonly size: number;
  readonly acquireAllSec: number;
  readonly roundTripsPerInterval: number;
  readonly renewalsPerInterval: number;
  readonly clientCpuShare: number;
  readonly heapBytesPerLease: number;
  readonly rssBytesPerLease: number;
  readonly extraAcquireP50Ms: number;
  readonly extraAcquireP99Ms: number;
  readonly lost: number;
  /** From the holder's stop to the last key granted again, when measured (Infinity: not all within 6 TTLs). */
  readonly regrantAllSec?: number;
  /** Keys granted again, and `unavailable` answers met on the way. */
  readonly regranted?: number;
  readonly regrantUnavailable?: number;
}

function settleHeap(): { heap: number; rss: number } {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs `n` tasks with at most `width` in flight; `task(i)` for i in [0, n). */
async function inFlight(n: number, width: number, task: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

/**
 * Holds `size` leases on `store` (a fresh key prefix), measures `intervals` renewal intervals,
 * and with `massExpiry` stops the holder and measures how long until another client holds
 * every key again. `other` is a second store object on the same backend for the extra client
 * (and the re-granting client), so that it does not share the holder's connection.
 */
export async function holdAtSize(
  store: LeaseStore,
  other: LeaseStore,
  size: number,
  intervals: number,
  massExpiry: boolean,
  roundTrips?: () => number,
): Promise<HeldFigures> {
  const crashable = new CrashableStore(store);
  const counting = new CountingLeaseStore(crashable);
  const holder = new LeaseClient({
    store: counting,
    ownerId: 'scale-holder',
    requestTimeout: '60s',
  });
  const extra = new LeaseClient({ store: other, ownerId: 'scale-extra', requestTimeout: '60s' });
  const prefix = `bench/scale/${randomBytes(3).toString('hex')}`;
  const held: Lease[] = [];
  let lost = 0;
  const offLost = holder.on('lost', () => lost++);
  const before = settleHeap();
  const t0 = performance.now();
  await inFlight(size, IN_FLIGHT, async (i) => {
    for (let attempt = 0; ; attempt++) {
      const r = await holder.acquire(`${prefix}/${i}`, {
        ttl: SCALE_TTL_MS,
        renewEvery: SCALE_EVERY_MS,
      });
      if (r.status === 'acquired') {
        held.push(r.lease);
        return;
      }
      if (attempt >= 5) throw new Error(`scale: acquire ${i} of ${size}: ${r.status}`);
    }
  });
  const acquireAllSec = (performance.now() - t0) / 1000;
  // One interval for the renewals to settle into their grid before measuring.
  await sleep(SCALE_EVERY_MS);
  const after = settleHeap();
  counting.reset();
  const rt0 = roundTrips?.() ?? 0;
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  const end = w0 + intervals * SCALE_EVERY_MS;
  // The extra client: one acquire and release after another on its own keys, all along.
  let k = 0;
  while (performance.now() < end) {
    const t = performance.now();
    const r = await extra.acquire(`${prefix}/extra/${k++}`, { ttl: SCALE_TTL_MS });
    latencies.push(performance.now() - t);
    if (r.status === 'acquired') await r.lease.release();
    await sleep(20);
  }
  const elapsed = performance.now() - w0;
  const cpu = process.cpuUsage(cpu0);
  const perInterval = (x: number): number => (x / elapsed) * SCALE_EVERY_MS;
  const trips = roundTrips ? roundTrips() - rt0 : counting.counts.calls;
  const renewals = counting.counts.leases;
  let regrantAllSec: number | undefined;
  let regranted = 0;
  let regrantUnavailable = 0;
  if (massExpiry) {
    crashable.crash();
    const c0 = performance.now();
    const giveUpAt = c0 + SCALE_TTL_MS * 6;
    await inFlight(size, IN_FLIGHT, async (i) => {
      // A store that answers `unavailable` under the load of a mass expiry (etcd revoking
      // its leases) is asked again, within one bound for the whole re-grant.
      while (performance.now() < giveUpAt) {
        const r = await extra.acquire(`${prefix}/${i}`, {
          ttl: SCALE_TTL_MS,
          wait: Math.max(1, Math.floor(giveUpAt - performance.now())),
        });
        if (r.status === 'acquired') {
          regranted++;
          await r.lease.release();
          return;
        }
        if (r.status !== 'unavailable') return;
        regrantUnavailable++;
      }
    });
    regrantAllSec = (performance.now() - c0) / 1000;
    if (regranted < size) regrantAllSec = Number.POSITIVE_INFINITY;
  } else {
    await inFlight(held.length, IN_FLIGHT, async (i) => void (await held[i]!.release()));
  }
  offLost();
  await Promise.race([holder.close(), sleep(2000)]);
  await extra.close();
  return {
    size,
    acquireAllSec,
    roundTripsPerInterval: perInterval(trips),
    renewalsPerInterval: perInterval(renewals),
    clientCpuShare: (cpu.user + cpu.system) / 1000 / elapsed,
    heapBytesPerLease: (after.heap - before.heap) / size,
    rssBytesPerLease: (after.rss - before.rss) / size,
    extraAcquireP50Ms: percentile(latencies, 50),
    extraAcquireP99Ms: percentile(latencies, 99),
    lost: massExpiry ? 0 : lost,
    ...(regrantAllSec === undefined ? {} : { regrantAllSec, regranted, regrantUnavailable }),
  };
}

/** One table row for a size. */
export function heldRow(subject: string, f: HeldFigures): BenchResult {
  const kb = (b: number): string => (b / 1024).toFixed(2);
  return {
    suite: 'scale',
    subject,
    scenario: `${f.size.toLocaleString('en-US')} leases held, ttl ${SCALE_TTL_MS / 1000}s`,
    workers: 1,
    keys: 'distinct',
    p50Ms: f.extraAcquireP50Ms,
    p99Ms: f.extraAcquireP99Ms,
    notes:
      `${f.roundTripsPerInterval.toFixed(1)} store round trips and ${f.renewalsPerInterval.toFixed(0)} renewals per interval; ` +
      `client CPU ${(f.clientCpuShare * 100).toFixed(2)}% of a core; heap ${kb(f.heapBytesPerLease)} KiB ` +
      `and RSS ${kb(f.rssBytesPerLease)} KiB per lease; ${f.lost} lost; acquiring all took ${f.acquireAllSec.toFixed(1)} s` +
      (f.regrantAllSec === undefined
        ? ''
        : Number.isFinite(f.regrantAllSec)
          ? `; after the holder stopped, every key granted again in ${f.regrantAllSec.toFixed(1)} s ` +
            `(${(f.regrantAllSec / (SCALE_TTL_MS / 1000)).toFixed(2)} TTLs, ${f.regrantUnavailable} unavailable answers retried)`
          : `; after the holder stopped, ${f.regranted} of ${f.size} keys granted again within 6 TTLs ` +
            `(${f.regrantUnavailable} unavailable answers)`) +
      '; p50/p99: an extra client acquiring at that size',
  };
}
