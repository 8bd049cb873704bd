// Side-by-side measurement of the lease server, for work on its speed:
//   node build/bench/http-ab.js [--rounds 5] [--seconds 2] [--clients 32]
//     [--base DIR]      also a server and client built elsewhere (DIR/src/...), e.g. the code before
//     [--prof DIR]      write the server's CPU profile (node --cpu-prof) into DIR
//     [--no-inprocess]  skip the in-process groupCommit subject
//     [--traced]        also this build's server with an OpenTelemetry SDK registered (every
//                       request and store call a recorded, exported span); without the flag no
//                       server has an SDK, which is the cost of tracing when it is not set up
//     [--stores 1]      HttpLeaseStores the clients share (1, like the in-process subject's one store;
//                       `npm run bench` also measures 4)
// Alternates windows of in-process SQLite with groupCommit (the server's setting) and this
// build's server with this build's client (and the same two of the base build); prints medians of
// cycles/s, p50/p99, client CPU ms/cycle (this process) and server CPU ms/cycle (read from
// /proc/<pid>/stat, which costs the server nothing). Windows alternate because the disk's fsync
// time drifts within a minute; the load average is printed with the results.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as ClientModule from '../src/core/client.js';
import type { LeaseStore } from '../src/core/store.js';
import type * as HttpModule from '../src/stores/http/store.js';
import type * as SqliteModule from '../src/stores/sqlite/store.js';
import { tempDir } from '../test/support/tmp.js';

const args = process.argv.slice(2);
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const rounds = Number(opt('--rounds') ?? 5);
const windowMs = Number(opt('--seconds') ?? 2) * 1000;
const clients = Number(opt('--clients') ?? 32);
const baseDir = opt('--base');
const profDir = opt('--prof');
const inProcess = !args.includes('--no-inprocess');
const storeCount = Number(opt('--stores') ?? 1);
const traced = args.includes('--traced');
const here = resolve(fileURLToPath(new URL('..', import.meta.url)));

interface Build {
  readonly name: string;
  readonly dir: string;
  /** Node options of its server (an SDK to load with `--import`). */
  readonly serverNodeArgs?: readonly string[];
}

interface Window {
  readonly cyclesPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly clientCpuMs: number;
  readonly serverCpuMs: number | undefined;
}

/** CPU seconds of process `pid` so far (user + system), from /proc. */
function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[11] and [12] are utime and stime (fields 14 and 15 of proc(5)), in clock ticks.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function startServer(
  build: Build,
  db: string,
): Promise<{ url: string; child: ChildProcess }> {
  const nodeArgs = [
    ...(build.serverNodeArgs ?? []),
    ...(profDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', profDir]),
  ];
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      join(build.dir, 'src/cli/main.js'),
      'serve',
      '--port',
      '0',
      '--log-level',
      'warn',
      '--store',
      `sqlite:${db}`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = await new Promise<string>((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`${build.name}: no listening line`)), 30_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        ok(m[1]!);
      }
    });
    child.once('exit', () => fail(new Error(`${build.name}: server exited`)));
  });
  return { url, child };
}

async function cycles(
  build: Build,
  stores: LeaseStore[],
  workers: number,
  ms: number,
): Promise<{ n: number; latencies: number[]; elapsed: number; cpuMs: number }> {
  const { LeaseClient } = (await import(
    join(build.dir, 'src/core/client.js')
  )) as typeof ClientModule;
  const latencies: number[] = [];
  const run = Math.random().toString(36).slice(2, 8);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + ms;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const client = new LeaseClient({ store: stores[w % stores.length]!, ownerId: `ab-${w}` });
      const key = `ab/${run}/${w}`;
      while (performance.now() < until) {
        const t0 = performance.now();
        const r = await client.acquire(key, { ttl: 10_000, autoRenew: false });
        if (r.status !== 'acquired') throw new Error(`not acquired: ${r.status}`);
        await r.lease.release();
        latencies.push(performance.now() - t0);
      }
      await client.close();
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return {
    n: latencies.length,
    latencies,
    elapsed: performance.now() - started,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

function summarise(
  c: Awaited<ReturnType<typeof cycles>>,
  serverCpuSeconds: number | undefined,
): Window {
  const sorted = c.latencies.sort((a, b) => a - b);
  const at = (p: number): number =>
    sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
  return {
    cyclesPerSec: (c.n * 1000) / c.elapsed,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    clientCpuMs: c.cpuMs / c.n,
    serverCpuMs: serverCpuSeconds === undefined ? undefined : (serverCpuSeconds * 1000) / c.n,
  };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Subject {
  readonly name: string;
  window(ms: number): Promise<Window>;
  close(): Promise<void>;
}

async function httpSubject(build: Build, db: string): Promise<Subject> {
  const server = await startServer(build, db);
  const { HttpLeaseStore } = (await import(
    join(build.dir, 'src/stores/http/store.js')
  )) as typeof HttpModule;
  const stores = await Promise.all(
    Array.from({ length: storeCount }, () => HttpLeaseStore.connect({ url: server.url })),
  );
  const pid = server.child.pid!;
  console.error(`${build.name}: server pid ${pid}`);
  return {
    name: `http ${build.name}`,
    async window(ms) {
      const cpu0 = procCpuSeconds(pid);
      const c = await cycles(build, stores, clients, ms);
      return summarise(c, procCpuSeconds(pid) - cpu0);
    },
    async close() {
      await Promise.all(stores.map((s) => s.close()));
      server.child.kill('SIGTERM');
      await new Promise((r) => server.child.once('exit', r));
    },
  };
}

async function inProcessSubject(build: Build, db: string): Promise<Subject> {
  const { SqliteLeaseStore } = (await import(
    join(build.dir, 'src/stores/sqlite/store.js')
  )) as typeof SqliteModule;
  const store = new SqliteLeaseStore({ path: db, groupCommit: true });
  return {
    name: `in-process groupCommit ${build.name}`,
    async window(ms) {
      return summarise(await cycles(build, [store], clients, ms), undefined);
    },
    close: () => store.close(),
  };
}

const tmp = tempDir('http-ab');
const current: Build = { name: 'this build', dir: join(here) };
const subjects: Subject[] = [];
try {
  if (inProcess) subjects.push(await inProcessSubject(current, join(tmp.dir, 'inproc.db')));
  subjects.push(await httpSubject(current, join(tmp.dir, 'served.db')));
  if (traced) {
    const setup = join(here, 'bench/trace-sdk-setup.js');
    const withSdk: Build = {
      ...current,
      name: 'this build, traced',
      serverNodeArgs: ['--import', setup],
    };
    subjects.push(await httpSubject(withSdk, join(tmp.dir, 'traced.db')));
  }
  if (baseDir !== undefined) {
    const base: Build = { name: `base (${baseDir})`, dir: resolve(baseDir) };
    if (inProcess) subjects.push(await inProcessSubject(base, join(tmp.dir, 'inproc-base.db')));
    subjects.push(await httpSubject(base, join(tmp.dir, 'base.db')));
  }
  for (const s of subjects) await s.window(Math.min(1000, windowMs)); // warm-up, unmeasured
  const results = new Map<string, Window[]>(subjects.map((s) => [s.name, []]));
  const load0 = loadavg()[0]!;
  for (let r = 0; r < rounds; r++) {
    for (const s of subjects) results.get(s.name)!.push(await s.window(windowMs));
  }
  const load1 = loadavg()[0]!;
  console.log(
    `${clients} clients over ${storeCount} store(s), ${rounds} rounds × ${windowMs / 1000} s, medians; load average ${load0.toFixed(2)} → ${load1.toFixed(2)}`,
  );
  const rows = [...results].map(([name, ws]) => ({
    subject: name,
    'cycles/s': Math.round(median(ws.map((w) => w.cyclesPerSec))),
    'p50 ms': median(ws.map((w) => w.p50Ms)).toFixed(2),
    'p99 ms': median(ws.map((w) => w.p99Ms)).toFixed(2),
    'client cpu ms/cycle': median(ws.map((w) => w.clientCpuMs)).toFixed(3),
    'server cpu ms/cycle':
      ws[0]!.serverCpuMs === undefined ? '–' : median(ws.map((w) => w.serverCpuMs!)).toFixed(3),
  }));
  console.table(rows);
  if (inProcess) {
    // Each build's HTTP rate against its own in-process groupCommit rate: like for like.
    for (const row of rows.filter((r) => r.subject.startsWith('http '))) {
      const build = row.subject.slice('http '.length);
      const own = rows.find((r) => r.subject === `in-process groupCommit ${build}`);
      if (own === undefined) continue;
      console.log(
        `${row.subject}: ${(row['cycles/s'] / own['cycles/s']).toFixed(2)}× in-process groupCommit of the same build`,
      );
    }
  }
} finally {
  for (const s of subjects) await s.close();
  tmp.remove();
}
