// `npm run bench -- --only scale`: how the cost of holding leases grows with their number, on
// every store. Sizes come from LEASEHOLD_SCALE_SIZES (default 1,000, 10,000 and 100,000; quick:
// 1,000 and 10,000); LEASEHOLD_SCALE_STORES picks stores (sqlite,postgres,redis,etcd,http).
// The largest size of each store also measures a mass expiry: the holder stops renewing and
// another client takes every key again. Run with `node --expose-gc` for steadier heap figures.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { LeaseStore } from '../src/core/store.js';
import { EtcdLeaseStore } from '../src/stores/etcd/store.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import { RedisLeaseStore } from '../src/stores/redis/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { deletePrefix } from '../test/contract/harnesses/redis.js';
import { killQuietly } from '../test/support/cli.js';
import { EtcdCluster } from '../test/support/etcd-cluster.js';
import { dropSchema } from '../test/support/postgres.js';
import { tempDir } from '../test/support/tmp.js';
import type { BenchOptions, BenchResult } from './lib.js';
import { startServe } from './serve.js';
import { heldRow, holdAtSize, type HeldFigures } from './scale-held.js';
import { writeLineChart, type Series } from './scale-plot.js';
import { waitersOnOneKey, watchersOnOneServer } from './scale-waiters.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/**
 * A store under test: two store objects on one backend (holder, other client), and cleanup.
 * `more` (PostgreSQL and Redis) opens another store object on the same schema or prefix,
 * closed with the rest.
 */
interface ScaleSubject {
  readonly name: string;
  readonly open: () => Promise<{
    holder: LeaseStore;
    other: LeaseStore;
    more?: () => LeaseStore;
    roundTrips?: () => number;
    close: () => Promise<void>;
  }>;
}

function sizesFrom(o: BenchOptions): number[] {
  const raw = process.env['LEASEHOLD_SCALE_SIZES'];
  const sizes = raw
    ? raw.split(',').map((s) => Number(s.trim()))
    : o.quick
      ? [1_000, 10_000]
      : [1_000, 10_000, 100_000];
  for (const s of sizes) {
    if (!Number.isSafeInteger(s) || s <= 0)
      throw new Error(`LEASEHOLD_SCALE_SIZES takes whole numbers above 0, got ${raw}`);
  }
  return sizes;
}

function subjects(tmp: string): ScaleSubject[] {
  return [
    {
      name: 'sqlite',
      open: () => {
        const path = join(tmp, `scale-${randomBytes(3).toString('hex')}.db`);
        const holder = new SqliteLeaseStore({ path });
        const other = new SqliteLeaseStore({ path });
        return Promise.resolve({
          holder,
          other,
          close: async () => {
            await holder.close();
            await other.close();
          },
        });
      },
    },
    {
      name: 'postgres',
      open: async () => {
        const schema = `lh_bench_scale_${process.pid}_${randomBytes(3).toString('hex')}`;
        const holder = new PostgresLeaseStore({ connectionString: PG_URL, schema });
        await holder.migrate();
        const other = new PostgresLeaseStore({ connectionString: PG_URL, schema });
        const extra: LeaseStore[] = [];
        return {
          holder,
          other,
          more: () => {
            const store = new PostgresLeaseStore({ connectionString: PG_URL, schema });
            extra.push(store);
            return store;
          },
          close: async () => {
            await holder.close();
            await other.close();
            for (const store of extra) await store.close();
            await dropSchema(schema);
          },
        };
      },
    },
    {
      name: 'redis',
      open: () => {
        const prefix = `lh-bench-scale:${randomBytes(3).toString('hex')}:`;
        const holder = new RedisLeaseStore({ redis: REDIS_URL, prefix });
        const other = new RedisLeaseStore({ redis: REDIS_URL, prefix });
        const extra: LeaseStore[] = [];
        return Promise.resolve({
          holder,
          other,
          more: () => {
            const store = new RedisLeaseStore({ redis: REDIS_URL, prefix });
            extra.push(store);
            return store;
          },
          close: async () => {
            await holder.close();
            await other.close();
            for (const store of extra) await store.close();
            const admin = new Redis(REDIS_URL);
            try {
              await deletePrefix(admin, prefix);
            } finally {
              admin.disconnect();
            }
          },
        });
      },
    },
    {
      name: 'etcd',
      open: async () => {
        const cluster = await EtcdCluster.start({ label: 'bench-scale' });
        const hosts = cluster.members.map((m) => m.clientUrl);
        const holder = new EtcdLeaseStore({ hosts });
        const other = new EtcdLeaseStore({ hosts });
        return {
          holder,
          other,
          // etcd renews through its sessions' keepalives, not one call per renewal.
          roundTrips: () => holder.keepAlivesSent,
          close: async () => {
            await holder.close();
            await other.close();
            await cluster.stop();
          },
        };
      },
    },
    {
      name: 'http (serve, postgres)',
      open: async () => {
        const schema = `lh_bench_scale_http_${process.pid}_${randomBytes(3).toString('hex')}`;
        const { url, proc } = await startServe(`${PG_URL}?schema=${schema}`);
        const holder = await HttpLeaseStore.connect({ url });
        const other = await HttpLeaseStore.connect({ url });
        return {
          holder,
          other,
          close: async () => {
            await holder.close();
            await other.close();
            killQuietly(proc);
            await dropSchema(schema);
          },
        };
      },
    },
  ];
}

/** Waiters on one key: PostgreSQL and Redis, four store connections shared by the waiters. */
async function waiterRows(o: BenchOptions, plot: Plot): Promise<BenchResult[]> {
  const counts =
    process.env['LEASEHOLD_SCALE_WAITERS']?.split(',').map(Number) ??
    (o.quick ? [10, 1_000] : [10, 100, 1_000, 10_000]);
  const rows: BenchResult[] = [];
  const wanted = process.env['LEASEHOLD_SCALE_STORES']?.split(',');
  const pick = subjects('').filter(
    (s) =>
      (s.name === 'postgres' || s.name === 'redis') &&
      (wanted === undefined || wanted.includes(s.name)),
  );
  for (const subject of pick) {
    for (const waiters of counts) {
      // Four store objects on one schema or prefix: the waiters must all wait for one key.
      // (Two opens, as this used to be, were two schemas: two keys, half the waiters each.)
      const opened = await subject.open();
      try {
        const stores = [opened.holder, opened.other, opened.more!(), opened.more!()];
        const { row, attemptsPerGrant } = await waitersOnOneKey(
          subject.name,
          stores,
          waiters,
          Math.min(waiters - 1, 200),
        );
        plot.point('attempts', subject.name, waiters, attemptsPerGrant);
        plot.point('handoff', subject.name, waiters, row.p99Ms ?? Number.NaN);
        console.error(`bench: scale ${subject.name} ${waiters} waiters: ${row.notes}`);
        rows.push(row);
      } finally {
        await opened.close().catch(() => undefined);
      }
    }
  }
  return rows;
}

/** Event-stream watchers on one `leasehold serve` over SQLite. */
async function watcherRows(o: BenchOptions, tmp: string, plot: Plot): Promise<BenchResult[]> {
  const counts = o.quick ? [10, 1_000] : [10, 100, 1_000, 10_000];
  const rows: BenchResult[] = [];
  for (const watchers of counts) {
    const { url, proc } = await startServe(`sqlite:${join(tmp, `sse-${watchers}.db`)}`);
    try {
      const store = await HttpLeaseStore.connect({ url });
      try {
        const row = await watchersOnOneServer(url, proc.child.pid!, store, watchers, 20);
        plot.point('fanout', 'event streams', watchers, row.p99Ms ?? Number.NaN);
        console.error(`bench: scale ${watchers} watchers: ${row.notes}`);
        rows.push(row);
      } finally {
        await store.close();
      }
    } finally {
      killQuietly(proc);
    }
  }
  return rows;
}

/** The sweep's points by chart and series, written as SVG charts at the end. */
class Plot {
  private readonly charts = new Map<string, Map<string, Array<[number, number]>>>();

  point(chart: string, series: string, x: number, y: number): void {
    let c = this.charts.get(chart);
    if (c === undefined) this.charts.set(chart, (c = new Map<string, Array<[number, number]>>()));
    let s = c.get(series);
    if (s === undefined) c.set(series, (s = []));
    s.push([x, y]);
  }

  held(store: string, f: HeldFigures): void {
    this.point('trips', store, f.size, f.roundTripsPerInterval);
    this.point('cpu', store, f.size, f.clientCpuShare * 100);
    this.point('extra', store, f.size, f.extraAcquireP99Ms);
    this.point('heap', store, f.size, f.heapBytesPerLease);
  }

  write(dir: string): void {
    const charts: Array<[string, string, string, string]> = [
      [
        'trips',
        'Store round trips per renewal interval',
        'leases held by one client',
        'round trips',
      ],
      ['cpu', 'Client CPU while holding leases', 'leases held by one client', '% of a core'],
      ['extra', 'Acquire p99 of another client', 'leases held by one client', 'ms'],
      ['heap', 'Client heap per held lease', 'leases held by one client', 'bytes'],
      ['attempts', 'Grant attempts per grant, waiters on one key', 'waiters', 'attempts'],
      ['handoff', 'Hand-off p99, waiters on one key', 'waiters', 'ms'],
      ['fanout', 'Event fan-out p99, watchers on one server', 'event streams', 'ms'],
    ];
    for (const [id, title, x, y] of charts) {
      const c = this.charts.get(id);
      if (c === undefined) continue;
      const series: Series[] = [...c].map(([name, points]) => ({ name, points }));
      writeLineChart(dir, `scale-${id}.svg`, title, x, y, series);
    }
  }
}

export async function scaleBenchmarks(o: BenchOptions): Promise<BenchResult[]> {
  const sizes = sizesFrom(o);
  const wanted = process.env['LEASEHOLD_SCALE_STORES']?.split(',');
  const parts = (process.env['LEASEHOLD_SCALE_PARTS'] ?? 'held,waiters,watchers').split(',');
  const massExpiry = process.env['LEASEHOLD_SCALE_EXPIRY'] !== '0';
  const tmp = tempDir('bench-scale');
  const results: BenchResult[] = [];
  const plot = new Plot();
  try {
    for (const subject of parts.includes('held') ? subjects(tmp.dir) : []) {
      if (wanted && !wanted.some((w) => subject.name.startsWith(w))) continue;
      for (const size of sizes) {
        const last = size === Math.max(...sizes);
        const stores = await subject.open();
        try {
          const f = await holdAtSize(
            stores.holder,
            stores.other,
            size,
            size >= 100_000 ? 1 : 2,
            massExpiry && last,
            stores.roundTrips,
          );
          const row = heldRow(subject.name, f);
          plot.held(subject.name, f);
          console.error(`bench: scale ${subject.name} ${size}: ${row.notes}`);
          results.push(row);
        } finally {
          await stores.close().catch(() => undefined);
        }
      }
    }
    if (parts.includes('waiters')) results.push(...(await waiterRows(o, plot)));
    if (parts.includes('watchers')) results.push(...(await watcherRows(o, tmp.dir, plot)));
    const dir = process.env['LEASEHOLD_SCALE_PLOTS'];
    if (dir) plot.write(dir);
  } finally {
    tmp.remove();
  }
  return results;
}
