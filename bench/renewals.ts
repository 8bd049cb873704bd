// Many leases held by one client: store round trips per renewal interval and the client's
// CPU, with renewals in batches (the store's renewMany) and one call per lease (the same store
// behind a counter that hides renewMany), in the same run, on SQLite, PostgreSQL, Redis and
// HTTP (a `leasehold serve` process over SQLite, so the bench process's CPU is the client's).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LeaseClient } from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import type { LeaseStore } from '../src/core/store.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import { RedisLeaseStore } from '../src/stores/redis/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { CountingLeaseStore } from '../src/testing/counting-store.js';
import { spawnCli, killQuietly } from '../test/support/cli.js';
import { deletePrefix } from '../test/contract/harnesses/redis.js';
import { dropSchema } from '../test/support/postgres.js';
import { tempDir } from '../test/support/tmp.js';
import type { BenchOptions, BenchResult } from './lib.js';
import { acquirePaced, EVERY_MS, TTL_MS } from './paced-acquire.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/**
 * Holds `leases` leases through `store` (acquired over one renewal interval, as a service
 * that picks up tenants over time would), then counts the renewal calls and the process's CPU
 * over `intervals` renewal intervals.
 */
async function holdMany(
  subject: string,
  mode: 'renewMany' | 'one call each',
  store: CountingLeaseStore,
  leases: number,
  intervals: number,
): Promise<BenchResult> {
  const client = new LeaseClient({ store, ownerId: `bench-${subject}` });
  const held: Lease[] = [];
  const run = randomBytes(3).toString('hex');
  try {
    await acquirePaced(client, `bench/renew/${run}`, leases, held);
    // One interval to settle into the renewal grid before measuring (as renewals-hold and
    // renewals-ab do): the first interval's renewals are still spread as the leases were taken.
    await new Promise((res) => setTimeout(res, EVERY_MS));
    store.reset();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, intervals * EVERY_MS));
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const { calls, leases: renewed } = store.counts;
    const lost = held.filter((l) => l.status !== 'held').length;
    if (lost > 0) throw new Error(`${subject} ${mode}: ${lost} leases lost during the measurement`);
    const perInterval = (calls / elapsed) * EVERY_MS;
    const renewedPerInterval = (renewed / elapsed) * EVERY_MS;
    const cpuShare = (cpu.user + cpu.system) / 1000 / elapsed;
    return {
      suite: 'renewals',
      subject: `${subject}: ${mode}`,
      scenario: `${leases} leases, ttl ${TTL_MS / 1000}s`,
      workers: 1,
      keys: 'distinct',
      notes:
        `${perInterval.toFixed(1)} store round trips per renewal interval ` +
        `(${renewedPerInterval.toFixed(0)} renewals); client CPU ${(cpuShare * 100).toFixed(2)}% of a core`,
    };
  } finally {
    await client.close();
  }
}

/** Batched, then one call each, over one store. */
async function both(
  subject: string,
  store: LeaseStore,
  leases: number,
  intervals: number,
): Promise<BenchResult[]> {
  return [
    await holdMany(subject, 'renewMany', new CountingLeaseStore(store), leases, intervals),
    await holdMany(
      subject,
      'one call each',
      new CountingLeaseStore(store, { batch: false }),
      leases,
      intervals,
    ),
  ];
}

/**
 * `--only renewals`: 10,000 leases (quick: 2,000) on SQLite, PostgreSQL, Redis and HTTP,
 * batched vs one call per lease. Round trips are counted by one counting forwarder in front
 * of each store: a store call, which is one statement (PostgreSQL), one script call (Redis
 * standalone), one transaction (SQLite) or one HTTP request (HTTP) per batch.
 */
export async function renewalBenchmarks(o: BenchOptions): Promise<BenchResult[]> {
  const leases = o.quick ? 2_000 : 10_000;
  const intervals = o.quick ? 1 : 3;
  const tmp = tempDir('bench-renewals');
  const results: BenchResult[] = [];
  const close: Array<() => Promise<unknown>> = [];
  try {
    const sqlite = new SqliteLeaseStore({ path: join(tmp.dir, 'renewals.db') });
    close.push(() => sqlite.close());
    results.push(...(await both('sqlite', sqlite, leases, intervals)));

    const schema = `lh_bench_renew_${process.pid}_${randomBytes(3).toString('hex')}`;
    const pgStore = new PostgresLeaseStore({ connectionString: PG_URL, schema });
    close.push(async () => {
      await pgStore.close();
      await dropSchema(schema);
    });
    await pgStore.migrate();
    results.push(...(await both('postgres', pgStore, leases, intervals)));

    const prefix = `lh-bench-renew:${randomBytes(3).toString('hex')}:`;
    const redisStore = new RedisLeaseStore({ redis: REDIS_URL, prefix });
    close.push(async () => {
      await redisStore.close();
      const admin = new Redis(REDIS_URL);
      try {
        await deletePrefix(admin, prefix);
      } finally {
        admin.disconnect();
      }
    });
    results.push(...(await both('redis', redisStore, leases, intervals)));

    const proc = spawnCli([
      'serve',
      '--port',
      '0',
      '--log-level',
      'warn',
      '--store',
      `sqlite:${join(tmp.dir, 'served.db')}`,
    ]);
    close.push(() => Promise.resolve(killQuietly(proc)));
    const url = (await proc.waitFor(/listening on (\S+)/))[1]!;
    const http = await HttpLeaseStore.connect({ url });
    close.push(() => http.close());
    results.push(...(await both('http (serve, sqlite)', http, leases, intervals)));
  } finally {
    for (const c of close.reverse()) await c().catch(() => undefined);
    tmp.remove();
  }
  return results;
}
