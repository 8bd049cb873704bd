// Many leases held by one client: store calls per renewal interval and the client's CPU,
// with renewals in batches (the store's renewMany) and one call per lease (the same store
// behind a forwarder, which hides renewMany), in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LeaseClient } from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import type {
  LeaseStore,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
} from '../src/core/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { ForwardingLeaseStore } from '../src/testing/forwarding-store.js';
import type { BenchOptions, BenchResult } from './lib.js';

const TTL_MS = 10_000;
const EVERY_MS = Math.floor(TTL_MS / 3);

/** Counts the renewal round trips of a SQLite store. */
class CountingSqlite extends SqliteLeaseStore {
  calls = 0;
  private inRenew = false;
  override renew(lease: StoreRenewRequest, options?: StoreRequestOptions) {
    this.calls++;
    // SQLite's renew is renewMany of one lease: count the call once.
    this.inRenew = true;
    try {
      return super.renew(lease, options);
    } finally {
      this.inRenew = false;
    }
  }
  override renewMany(
    leases: readonly StoreRenewRequest[],
    options?: StoreRequestOptions,
  ): Promise<readonly StoreRenewResult[]> {
    if (!this.inRenew) this.calls++;
    return super.renewMany(leases, options);
  }
}

async function holdMany(
  subject: string,
  store: LeaseStore,
  counter: CountingSqlite,
  leases: number,
  intervals: number,
): Promise<BenchResult> {
  const client = new LeaseClient({ store, ownerId: `bench-${subject}` });
  const held: Lease[] = [];
  try {
    // Acquired over one renewal interval, as a service that picks up tenants over time would.
    const spacing = EVERY_MS / leases;
    const start = performance.now();
    for (let i = 0; i < leases; i++) {
      const r = await client.acquire(`bench/renew/${subject}/${i}`, {
        ttl: TTL_MS,
        renewEvery: EVERY_MS,
      });
      if (r.status !== 'acquired') throw new Error(`acquire ${i}: ${r.status}`);
      held.push(r.lease);
      const due = start + (i + 1) * spacing;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    }
    counter.calls = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, intervals * EVERY_MS));
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const lost = held.filter((l) => l.status !== 'held').length;
    if (lost > 0) throw new Error(`${lost} leases lost during the measurement`);
    const perInterval = (counter.calls / elapsed) * EVERY_MS;
    const cpuShare = (cpu.user + cpu.system) / 1000 / elapsed;
    return {
      suite: 'renewals',
      subject,
      scenario: `${leases} leases, ttl ${TTL_MS / 1000}s`,
      workers: 1,
      keys: 'distinct',
      notes: `${perInterval.toFixed(1)} store calls per renewal interval; client CPU ${(cpuShare * 100).toFixed(2)}% of a core`,
    };
  } finally {
    await client.close();
  }
}

/** `--only renewals`: 10,000 leases on SQLite (quick: 2,000), batched vs one call per lease. */
export async function renewalBenchmarks(o: BenchOptions): Promise<BenchResult[]> {
  const leases = o.quick ? 2_000 : 10_000;
  const intervals = o.quick ? 1 : 3;
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-bench-renewals-'));
  const results: BenchResult[] = [];
  try {
    const batched = new CountingSqlite({ path: join(dir, 'batched.db') });
    results.push(await holdMany('leasehold renewMany', batched, batched, leases, intervals));
    await batched.close();
    const single = new CountingSqlite({ path: join(dir, 'single.db') });
    const forwarded = new ForwardingLeaseStore(single);
    results.push(await holdMany('leasehold one call each', forwarded, single, leases, intervals));
    await single.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
