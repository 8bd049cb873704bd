// One store, many leases held by one client: the renewals bench's measurement alone, for
// profiles and A/B runs of the renewal path. Holds `--leases` leases (acquired over one
// renewal interval), then measures store calls and the process's CPU over `--seconds`;
// `--profile FILE` writes a CPU profile of the measured part only (the acquisitions are not in
// it). `floor` is the memory store with a renewMany that renews each lease as `renew` would:
// a store that costs almost nothing, so what is left is the client's own share; `null`
// answers every renewal `renewed` without looking, for the client's share alone.
//
//   node build/bench/renewals-hold.js --store postgres --leases 10000 --seconds 15 \
//     --profile /tmp/renewals.cpuprofile
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { LeaseClient } from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import type {
  BatchRenewingLeaseStore,
  LeaseStore,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
} from '../src/core/store.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { MemoryLeaseStore } from '../src/stores/memory/store.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import { RedisLeaseStore } from '../src/stores/redis/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { CountingLeaseStore } from '../src/testing/counting-store.js';
import { deletePrefix } from '../test/contract/harnesses/redis.js';
import { killQuietly, spawnCli } from '../test/support/cli.js';
import { dropSchema } from '../test/support/postgres.js';
import { tempDir } from '../test/support/tmp.js';
import { acquirePaced, EVERY_MS } from './paced-acquire.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/** The memory store with renewMany: each lease renewed as `renew` would, in one call. */
class FloorStore extends MemoryLeaseStore implements BatchRenewingLeaseStore {
  renewMany(
    leases: readonly StoreRenewRequest[],
    options: StoreRequestOptions,
  ): Promise<readonly StoreRenewResult[]> {
    return Promise.all(leases.map((lease) => this.renew(lease, options)));
  }
}

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'postgres' },
    leases: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '15' },
    mode: { type: 'string', default: 'renewMany' },
    profile: { type: 'string' },
    'heap-profile': { type: 'string' },
    url: { type: 'string' },
  },
});
const leases = Number(values.leases);
const seconds = Number(values.seconds);

async function open(kind: string): Promise<{ store: LeaseStore; close: () => Promise<void> }> {
  const tmp = tempDir('renewals-hold');
  const closers: Array<() => Promise<unknown>> = [() => Promise.resolve(tmp.remove())];
  const close = async (): Promise<void> => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  switch (kind) {
    case 'floor':
      return { store: new FloorStore(), close };
    case 'null': {
      // renewMany answers `renewed` for every lease at once, checking nothing: what is left is
      // the client's own work alone (a profile of the client without any store in it).
      const store = new MemoryLeaseStore();
      const renewed = Object.freeze({ status: 'renewed' as const });
      Object.defineProperty(store, 'renewMany', {
        value: (ls: readonly unknown[]) => Promise.resolve(ls.map(() => renewed)),
      });
      return { store, close };
    }
    case 'sqlite': {
      const store = new SqliteLeaseStore({ path: join(tmp.dir, 'renewals.db') });
      closers.push(() => store.close());
      return { store, close };
    }
    case 'postgres': {
      const schema = `lh_renew_hold_${process.pid}_${randomBytes(3).toString('hex')}`;
      const store = new PostgresLeaseStore({ connectionString: PG_URL, schema });
      closers.push(async () => {
        await store.close();
        await dropSchema(schema);
      });
      await store.migrate();
      return { store, close };
    }
    case 'redis': {
      const prefix = `lh-renew-hold:${randomBytes(3).toString('hex')}:`;
      const store = new RedisLeaseStore({ redis: REDIS_URL, prefix });
      closers.push(async () => {
        await store.close();
        const admin = new Redis(REDIS_URL);
        try {
          await deletePrefix(admin, prefix);
        } finally {
          admin.disconnect();
        }
      });
      return { store, close };
    }
    case 'http': {
      if (values.url !== undefined) {
        // A server started by hand (e.g. under --cpu-prof, for a profile of its side).
        const store = await HttpLeaseStore.connect({ url: values.url });
        closers.push(() => store.close());
        return { store, close };
      }
      const proc = spawnCli([
        'serve',
        '--port',
        '0',
        '--log-level',
        'warn',
        '--store',
        `sqlite:${join(tmp.dir, 'served.db')}`,
      ]);
      closers.push(() => Promise.resolve(killQuietly(proc)));
      const url = (await proc.waitFor(/listening on (\S+)/))[1]!;
      const store = await HttpLeaseStore.connect({ url });
      closers.push(() => store.close());
      return { store, close };
    }
    default:
      throw new Error(`unknown store ${kind}`);
  }
}

async function main(): Promise<void> {
  const { store: inner, close } = await open(values.store);
  const store = new CountingLeaseStore(inner, { batch: values.mode !== 'single' });
  const client = new LeaseClient({ store, ownerId: `hold-${values.store}` });
  const held: Lease[] = [];
  const heapProfile = values['heap-profile'];
  const session =
    values.profile === undefined && heapProfile === undefined ? undefined : new Session();
  try {
    const run = randomBytes(3).toString('hex');
    await acquirePaced(client, `bench/renew/${run}`, leases, held);
    // One interval to settle into the grid before measuring.
    await new Promise((res) => setTimeout(res, EVERY_MS));
    if (session !== undefined) session.connect();
    if (heapProfile !== undefined) {
      // Allocation sampling (every 4 KiB allocated on average): where the garbage comes from.
      await session!.post('HeapProfiler.enable');
      await session!.post('HeapProfiler.startSampling', {
        samplingInterval: 4096,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    }
    if (session !== undefined && values.profile !== undefined) {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.start');
    }
    store.reset();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, seconds * 1000));
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    if (session !== undefined && values.profile !== undefined) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(values.profile, JSON.stringify(profile));
    }
    if (heapProfile !== undefined) {
      const { profile } = await session!.post('HeapProfiler.stopSampling');
      writeFileSync(heapProfile, JSON.stringify(profile));
    }
    session?.disconnect();
    const lost = held.filter((l) => l.status !== 'held').length;
    const reasons: Record<string, number> = {};
    for (const l of held) {
      if (l.status !== 'held')
        reasons[l.lossReason ?? '?'] = (reasons[l.lossReason ?? '?'] ?? 0) + 1;
    }
    const { calls, leases: renewed } = store.counts;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    console.log(
      JSON.stringify({
        store: values.store,
        mode: values.mode,
        leases,
        seconds: +(elapsed / 1000).toFixed(2),
        callsPerInterval: +((calls / elapsed) * EVERY_MS).toFixed(2),
        renewalsPerInterval: Math.round((renewed / elapsed) * EVERY_MS),
        cpuPercent: +((cpuMs / elapsed) * 100).toFixed(2),
        usPerRenewal: renewed > 0 ? +((cpuMs * 1000) / renewed).toFixed(2) : null,
        lost,
        reasons,
        load: (await import('node:os')).loadavg().map((x) => +x.toFixed(2)),
      }),
    );
  } finally {
    await client.close();
    await close();
  }
}

await main();
