// Many leases held by one client, two builds side by side in one process: the renewal path of
// an older build (`--old DIR`, a copy of an earlier `build/`) against this one, in interleaved
// rounds (the order alternates) over the same kind of store, so both see the same machine.
// Per round and build: `--leases` leases acquired over one renewal interval, one interval to
// settle, then store calls and the process's CPU over `--seconds`. Reports each round and the
// median per build; on HTTP also the server process's CPU (each build runs its own `serve`),
// on SQLite the time spent inside the renewal transactions (better-sqlite3's statements and
// the commit: the database's own work, done in this process) apart from the rest.
//
//   cp -r build /tmp/x && mv /tmp/x node_modules/.ab-old   # the "before" build (needs node_modules)
//   node build/bench/renewals-ab.js --store sqlite --old node_modules/.ab-old --rounds 4
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import type { LeaseClient } from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import type { LeaseStore } from '../src/core/store.js';
import type { CountingLeaseStore } from '../src/testing/counting-store.js';
import { deletePrefix } from '../test/contract/harnesses/redis.js';
import { killQuietly, type spawnCli as spawnThisCli } from '../test/support/cli.js';
import { dropSchema } from '../test/support/postgres.js';
import { tempDir } from '../test/support/tmp.js';
import { acquirePaced, EVERY_MS } from './paced-acquire.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux everywhere we run). */
const USER_HZ = 100;

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite' },
    old: { type: 'string', default: 'node_modules/.ab-old' },
    leases: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '4' },
  },
});
const leases = Number(values.leases);
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);

/** The modules of one build that a run needs. */
interface Build {
  readonly name: 'old' | 'new';
  readonly dir: string;
  readonly LeaseClient: new (o: { store: LeaseStore; ownerId: string }) => LeaseClient;
  readonly CountingLeaseStore: new (s: LeaseStore) => CountingLeaseStore;
  readonly open: () => Promise<Opened>;
}

interface Opened {
  readonly store: LeaseStore;
  readonly close: () => Promise<void>;
  /** The server process's CPU so far in ms (HTTP only). */
  readonly serverCpuMs?: () => number;
  /** Time inside the renewal transactions so far in ms (SQLite only). */
  readonly insideMs?: () => number;
}

async function loadBuild(name: 'old' | 'new', dir: string): Promise<Build> {
  const url = (p: string): string => pathToFileURL(join(dir, p)).href;
  const client = (await import(url('src/core/client.js'))) as {
    LeaseClient: Build['LeaseClient'];
  };
  const counting = (await import(url('src/testing/counting-store.js'))) as {
    CountingLeaseStore: Build['CountingLeaseStore'];
  };
  const open = async (): Promise<Opened> => {
    const tmp = tempDir(`renewals-ab-${name}`);
    const closers: Array<() => Promise<unknown>> = [() => Promise.resolve(tmp.remove())];
    const close = async (): Promise<void> => {
      for (const c of closers.reverse()) await c().catch(() => undefined);
    };
    switch (values.store) {
      case 'floor': {
        // This build's memory store, with a renewMany that answers `renewed` for every lease
        // at once: a store that costs nothing, so what is measured is the client's own work.
        const { MemoryLeaseStore } = (await import(url('src/stores/memory/store.js'))) as {
          MemoryLeaseStore: new () => LeaseStore;
        };
        const store = new MemoryLeaseStore();
        const renewed = Object.freeze({ status: 'renewed' as const });
        Object.defineProperty(store, 'renewMany', {
          value: (ls: readonly unknown[]) => Promise.resolve(ls.map(() => renewed)),
        });
        return { store, close };
      }
      case 'sqlite': {
        const { SqliteLeaseStore } = (await import(url('src/stores/sqlite/store.js'))) as {
          SqliteLeaseStore: new (o: { path: string }) => LeaseStore;
        };
        const store = new SqliteLeaseStore({ path: join(tmp.dir, 'renewals.db') });
        closers.push(() => store.close());
        // The renewal transaction (statements + BEGIN/COMMIT), its CPU timed from outside
        // (the process's: nothing else runs while it does): about eight calls per interval,
        // so the timing itself costs nothing measurable.
        const tx = (store as unknown as { tx: Record<string, unknown> }).tx;
        const name = Object.keys(tx).find((k) => k.startsWith('renewMany'))!;
        const inner = tx[name] as (...a: unknown[]) => unknown;
        let inside = 0;
        tx[name] = (...a: unknown[]) => {
          const c = process.cpuUsage();
          try {
            return inner(...a);
          } finally {
            const d = process.cpuUsage(c);
            inside += (d.user + d.system) / 1000;
          }
        };
        return { store, close, insideMs: () => inside };
      }
      case 'postgres': {
        const { PostgresLeaseStore } = (await import(url('src/stores/postgres/store.js'))) as {
          PostgresLeaseStore: new (o: {
            connectionString: string;
            schema: string;
          }) => LeaseStore & {
            migrate(): Promise<void>;
          };
        };
        const schema = `lh_renew_ab_${process.pid}_${randomBytes(3).toString('hex')}`;
        const store = new PostgresLeaseStore({ connectionString: PG_URL, schema });
        closers.push(async () => {
          await store.close();
          await dropSchema(schema);
        });
        await store.migrate();
        return { store, close };
      }
      case 'redis': {
        const { RedisLeaseStore } = (await import(url('src/stores/redis/store.js'))) as {
          RedisLeaseStore: new (o: { redis: string; prefix: string }) => LeaseStore;
        };
        const prefix = `lh-renew-ab:${randomBytes(3).toString('hex')}:`;
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
        const { HttpLeaseStore } = (await import(url('src/stores/http/store.js'))) as {
          HttpLeaseStore: { connect(o: { url: string }): Promise<LeaseStore> };
        };
        // This build's own CLI: its test/support/cli.js spawns the main.js next to it.
        const { spawnCli } = (await import(url('test/support/cli.js'))) as {
          spawnCli: typeof spawnThisCli;
        };
        const args = ['serve', '--port', '0', '--log-level', 'warn'];
        const proc = spawnCli([...args, '--store', `sqlite:${join(tmp.dir, 'served.db')}`]);
        closers.push(() => Promise.resolve(killQuietly(proc)));
        const address = (await proc.waitFor(/listening on (\S+)/))[1]!;
        const store = await HttpLeaseStore.connect({ url: address });
        closers.push(() => store.close());
        const pid = proc.child.pid!;
        const serverCpuMs = (): number => {
          // Fields 14 and 15 (utime, stime) after the command name in parentheses.
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
          return ((Number(f[11]) + Number(f[12])) * 1000) / USER_HZ;
        };
        return { store, close, serverCpuMs };
      }
      default:
        throw new Error(`unknown store ${values.store}`);
    }
  };
  return {
    name,
    dir,
    LeaseClient: client.LeaseClient,
    CountingLeaseStore: counting.CountingLeaseStore,
    open,
  };
}

interface Round {
  readonly build: string;
  readonly callsPerInterval: number;
  readonly cpuPercent: number;
  readonly usPerRenewal: number;
  readonly insideUsPerRenewal?: number;
  readonly serverCpuPercent?: number;
  readonly lost: number;
}

async function measure(build: Build, opened: Opened, round: number): Promise<Round> {
  const store = new build.CountingLeaseStore(opened.store);
  const client = new build.LeaseClient({ store, ownerId: `ab-${build.name}` });
  const held: Lease[] = [];
  try {
    const run = `${build.name}-${round}-${randomBytes(3).toString('hex')}`;
    await acquirePaced(client, `bench/renew-ab/${run}`, leases, held);
    await new Promise((res) => setTimeout(res, EVERY_MS));
    store.reset();
    const server0 = opened.serverCpuMs?.();
    const inside0 = opened.insideMs?.();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, seconds * 1000));
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const inside = inside0 === undefined ? undefined : opened.insideMs!() - inside0;
    const server = server0 === undefined ? undefined : opened.serverCpuMs!() - server0;
    const { calls, leases: renewed } = store.counts;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    return {
      build: build.name,
      callsPerInterval: +((calls / elapsed) * EVERY_MS).toFixed(2),
      cpuPercent: +((cpuMs / elapsed) * 100).toFixed(2),
      usPerRenewal: +((cpuMs * 1000) / renewed).toFixed(2),
      ...(inside === undefined
        ? {}
        : { insideUsPerRenewal: +((inside * 1000) / renewed).toFixed(2) }),
      ...(server === undefined ? {} : { serverCpuPercent: +((server / elapsed) * 100).toFixed(2) }),
      lost: held.filter((l) => l.status !== 'held').length,
    };
  } finally {
    await client.close();
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function main(): Promise<void> {
  const builds = [
    await loadBuild('old', resolve(values.old)),
    await loadBuild('new', resolve(import.meta.dirname, '..')),
  ];
  const opened = new Map<Build, Opened>();
  try {
    for (const b of builds) opened.set(b, await b.open());
    const all: Round[] = [];
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? builds : [...builds].reverse();
      for (const b of order) {
        const row = await measure(b, opened.get(b)!, r);
        all.push(row);
        console.log(JSON.stringify({ store: values.store, round: r, ...row }));
      }
    }
    for (const b of builds) {
      const rows = all.filter((x) => x.build === b.name);
      const med = (f: (x: Round) => number | undefined): number | undefined => {
        const xs = rows.map(f).filter((x): x is number => x !== undefined);
        return xs.length === 0 ? undefined : +median(xs).toFixed(2);
      };
      console.log(
        JSON.stringify({
          store: values.store,
          build: b.name,
          median: true,
          rounds: rows.length,
          callsPerInterval: med((x) => x.callsPerInterval),
          cpuPercent: med((x) => x.cpuPercent),
          usPerRenewal: med((x) => x.usPerRenewal),
          insideUsPerRenewal: med((x) => x.insideUsPerRenewal),
          serverCpuPercent: med((x) => x.serverCpuPercent),
          lost: rows.reduce((a, x) => a + x.lost, 0),
        }),
      );
    }
  } finally {
    for (const o of opened.values()) await o.close();
  }
}

await main();
