import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LeaseClient } from '../src/core/client.js';
import type { LeaseStore } from '../src/core/store.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { spawnCli, killQuietly, type CliProcess } from '../test/support/cli.js';
import { runHttpLoad } from '../test/support/http-load.js';
import { tempDir } from '../test/support/tmp.js';
import { hotKeyBenchmarks } from './http-hot.js';
import type { BenchOptions, BenchResult } from './lib.js';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

/** What one measurement window saw. */
interface Window {
  readonly cycles: number;
  readonly cyclesPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly cpuMsPer1000: number;
  readonly failures: number;
}

/**
 * `workers` clients each acquire+release their own key in a loop for `durationMs`. With
 * `ratePerSec`, the clients together offer that many cycles per second (each waits for its
 * next slot), so the latency is measured below saturation; otherwise they run flat out (a
 * closed loop, where latency ≈ workers / throughput by Little's law).
 */
async function cycles(
  stores: LeaseStore[],
  workers: number,
  durationMs: number,
  ratePerSec?: number,
): Promise<Window> {
  const latencies: number[] = [];
  const run = Math.random().toString(36).slice(2, 8);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + durationMs;
  const periodMs = ratePerSec === undefined ? 0 : (workers * 1000) / ratePerSec;
  let failures = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const client = new LeaseClient({ store: stores[w % stores.length]!, ownerId: `bench-${w}` });
      const key = `bench/${run}/${w}`;
      // Paced clients start spread over one period, not all at once.
      let next = started + (periodMs * w) / workers;
      while (performance.now() < until) {
        if (periodMs > 0) {
          const sleep = next - performance.now();
          if (sleep > 0) await new Promise((r) => setTimeout(r, sleep));
          next += periodMs;
          if (performance.now() >= until) break;
        }
        const t0 = performance.now();
        const r = await client.acquire(key, { ttl: 10_000, autoRenew: false });
        if (r.status !== 'acquired') {
          failures++;
          continue;
        }
        await r.lease.release();
        latencies.push(performance.now() - t0);
      }
      await client.close();
    }),
  );
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const n = latencies.length;
  return {
    cycles: n,
    cyclesPerSec: (n * 1000) / elapsed,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    cpuMsPer1000: n === 0 ? Number.NaN : ((cpu.user + cpu.system) / 1000 / n) * 1000,
    failures,
  };
}

/** A `leasehold serve` child process, with its CPU time and event-loop lag read from /metrics. */
interface Server {
  readonly url: string;
  readonly proc: CliProcess;
  /** Reads the server's CPU seconds so far; also resets its event-loop lag histogram. */
  sample(): Promise<{ cpuSeconds: number; lagP99Ms: number; lagMaxMs: number }>;
}

async function startServer(args: string[]): Promise<Server> {
  const proc = spawnCli(['serve', '--port', '0', '--log-level', 'warn', ...args]);
  const url = (await proc.waitFor(/listening on (\S+)/))[1]!;
  const metric = (text: string, name: string): number => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
    return m === null ? Number.NaN : Number(m[1]);
  };
  return {
    url,
    proc,
    async sample() {
      const text = await (await fetch(`${url}/metrics`)).text();
      return {
        cpuSeconds: metric(text, 'process_cpu_seconds_total'),
        lagP99Ms: metric(text, 'nodejs_eventloop_lag_p99_seconds') * 1000,
        lagMaxMs: metric(text, 'nodejs_eventloop_lag_max_seconds') * 1000,
      };
    },
  };
}

/** One measurement against a server: the client's window plus the server's CPU per cycle. */
async function overHttp(
  server: Server,
  stores: LeaseStore[],
  workers: number,
  durationMs: number,
  ratePerSec?: number,
): Promise<Window & { serverCpuMsPer1000: number; lagP99Ms: number; lagMaxMs: number }> {
  // A scrape costs the server CPU too: two back to back measure one, which is subtracted.
  const first = await server.sample();
  const before = await server.sample();
  const w = await cycles(stores, workers, durationMs, ratePerSec);
  const after = await server.sample();
  const scrape = before.cpuSeconds - first.cpuSeconds;
  return {
    ...w,
    serverCpuMsPer1000: ((after.cpuSeconds - before.cpuSeconds - scrape) * 1000 * 1000) / w.cycles,
    lagP99Ms: after.lagP99Ms,
    lagMaxMs: after.lagMaxMs,
  };
}

function median<T extends { cyclesPerSec: number }>(xs: T[]): T {
  return [...xs].sort((a, b) => a.cyclesPerSec - b.cyclesPerSec)[Math.floor(xs.length / 2)]!;
}

function row(
  subject: string,
  scenario: string,
  workers: number,
  w: Window & { serverCpuMsPer1000?: number; lagP99Ms?: number; lagMaxMs?: number },
  notes: string[],
): BenchResult {
  if (w.lagP99Ms !== undefined) {
    notes.push(
      `server event-loop lag p99 ${w.lagP99Ms.toFixed(1)} ms, max ${w.lagMaxMs?.toFixed(1)} ms`,
    );
  }
  if (w.failures > 0) notes.push(`${w.failures} failed attempts`);
  return {
    suite: 'http',
    subject,
    scenario,
    workers,
    keys: 'distinct',
    cyclesPerSec: w.cyclesPerSec,
    p50Ms: w.p50Ms,
    p99Ms: w.p99Ms,
    cpuMsPer1000: w.cpuMsPer1000,
    serverCpuMsPer1000: w.serverCpuMsPer1000,
    notes: notes.join('; ') || undefined,
  };
}

/** Offered load of the paced rows: well below what either side sustains on this machine. */
const PACED_RATE = 320;

/**
 * The HTTP server's benchmarks. The server (`leasehold serve`, its own process, SQLite with
 * group commit as `serve` opens it) against the same acquire+release cycle on in-process SQLite,
 * both with the store's default (one fsync per grant) and with group commit, the server's
 * setting — like is compared with like. At 32 clients the in-process and HTTP windows
 * alternate (median of 3 rounds; 1 when quick), because the disk's fsync time drifts by 2×
 * within a minute. Client CPU is the bench process; server CPU is read from its /metrics.
 * The HTTP side is one `HttpLeaseStore` shared by the 32 clients (as the in-process side is one
 * store), batching on; then four stores of 8 clients, and four without batching, for reference.
 * Every subject runs one unmeasured warm-up window first. Then 1 client, a paced load (latency
 * below saturation), the memory store (HTTP cost without fsync), and a bounded load run on hot
 * keys that checks the history.
 */
export async function httpBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const tmp = tempDir('bench-http');
  const procs: CliProcess[] = [];
  const opened: LeaseStore[] = [];
  try {
    const direct = new SqliteLeaseStore({ path: join(tmp.dir, 'direct.db') });
    const grouped = new SqliteLeaseStore({ path: join(tmp.dir, 'grouped.db'), groupCommit: true });
    opened.push(direct, grouped);
    const sqliteServer = await startServer(['--store', `sqlite:${join(tmp.dir, 'served.db')}`]);
    procs.push(sqliteServer.proc);
    // Like for like: one store object shared by the 32 clients, as in-process.
    const httpStore = await HttpLeaseStore.connect({ url: sqliteServer.url });
    const httpStores = [httpStore];
    // The same over four stores (four independent batch streams), and without batching.
    const fourStores = await Promise.all(
      Array.from({ length: 4 }, () => HttpLeaseStore.connect({ url: sqliteServer.url })),
    );
    const unbatched = await Promise.all(
      Array.from({ length: 4 }, () =>
        HttpLeaseStore.connect({ url: sqliteServer.url, batch: false }),
      ),
    );
    opened.push(httpStore, ...fourStores, ...unbatched);

    const rounds = opts.quick ? 1 : 3;
    const slice = opts.durationMs;
    const runs = { direct: [] as Window[], grouped: [] as Window[], http: [] as Window[] };
    const httpRuns: Awaited<ReturnType<typeof overHttp>>[] = [];
    // One unmeasured window each first: a cold server (or client) spends its first second in
    // the JIT compiler, which a 1 s quick window would otherwise mostly measure.
    const warmMs = Math.min(1000, slice);
    await cycles([direct], 32, warmMs);
    await cycles([grouped], 32, warmMs);
    await cycles(httpStores, 32, warmMs);
    await cycles(unbatched, 32, warmMs);
    for (let r = 0; r < rounds; r++) {
      runs.direct.push(await cycles([direct], 32, slice));
      runs.grouped.push(await cycles([grouped], 32, slice));
      httpRuns.push(await overHttp(sqliteServer, httpStores, 32, slice));
    }
    const inProcess = median(runs.direct);
    const inProcessGrouped = median(runs.grouped);
    const http32 = median(httpRuns);
    const roundsNote = `median of ${rounds} rounds alternating in-process and HTTP`;
    results.push(
      row('leasehold sqlite (in-process)', 'cycle', 32, inProcess, [
        roundsNote,
        'store default: one fsync per grant',
      ]),
      row('leasehold sqlite (in-process, groupCommit)', 'cycle', 32, inProcessGrouped, [
        roundsNote,
        'grants of one loop turn share one fsync, as in the server',
      ]),
      row('leasehold http → sqlite', 'cycle', 32, http32, [
        roundsNote,
        'one HttpLeaseStore, batching on (the default)',
        `${(http32.cyclesPerSec / inProcess.cyclesPerSec).toFixed(2)}× in-process default, ${(http32.cyclesPerSec / inProcessGrouped.cyclesPerSec).toFixed(2)}× in-process groupCommit`,
      ]),
    );

    const four = await overHttp(sqliteServer, fourStores, 32, slice);
    const single = await overHttp(sqliteServer, unbatched, 32, slice);
    results.push(
      row('leasehold http → sqlite (4 stores)', 'cycle', 32, four, [
        `four HttpLeaseStores of 8 clients each; ${(four.cyclesPerSec / inProcessGrouped.cyclesPerSec).toFixed(2)}× in-process groupCommit`,
      ]),
      row('leasehold http → sqlite (unbatched)', 'cycle', 32, single, [
        `four HttpLeaseStores with batch: false, one HTTP request per call; ${(single.cyclesPerSec / inProcessGrouped.cyclesPerSec).toFixed(2)}× in-process groupCommit`,
      ]),
    );

    results.push(
      row('leasehold sqlite (in-process)', 'cycle', 1, await cycles([direct], 1, slice), []),
      row(
        'leasehold http → sqlite',
        'cycle',
        1,
        await overHttp(sqliteServer, httpStores, 1, slice),
        [],
      ),
      row(
        'leasehold sqlite (in-process)',
        `paced ${PACED_RATE}/s`,
        32,
        await cycles([direct], 32, slice, PACED_RATE),
        ['offered load, below saturation'],
      ),
      row(
        'leasehold http → sqlite',
        `paced ${PACED_RATE}/s`,
        32,
        await overHttp(sqliteServer, httpStores, 32, slice, PACED_RATE),
        ['offered load, below saturation'],
      ),
    );

    const memoryServer = await startServer(['--store', 'memory:']);
    procs.push(memoryServer.proc);
    const memStores = [await HttpLeaseStore.connect({ url: memoryServer.url })];
    opened.push(...memStores);
    await cycles(memStores, 32, warmMs);
    results.push(
      row(
        'leasehold http → memory',
        'cycle',
        32,
        await overHttp(memoryServer, memStores, 32, slice),
        ['HTTP cost without fsync'],
      ),
    );

    const loadMs = opts.quick ? Math.min(5000, opts.durationMs) : 30_000;
    const clients = opts.quick ? 50 : 100;
    const load = await runHttpLoad({
      url: sqliteServer.url,
      clients,
      keys: 10,
      durationMs: loadMs,
      prefix: `bench-load/${Date.now()}/`,
      wait: '2s',
    });
    load.cycleMs.sort((a, b) => a - b);
    results.push({
      suite: 'http',
      subject: 'leasehold http → sqlite',
      scenario: `load ${loadMs / 1000}s`,
      workers: clients,
      keys: 'hot',
      cyclesPerSec: (load.grants * 1000) / load.elapsedMs,
      p50Ms: percentile(load.cycleMs, 0.5),
      p99Ms: percentile(load.cycleMs, 0.99),
      notes: `${load.grants} grants, ${load.busy} busy after 2s wait, ${load.http5xx} 5xx, ${load.unavailable} unavailable, ${load.grantsMissingFromEvents} grants missing from events, ${load.violations.length} history violations`,
    });
    if (load.violations.length > 0 || load.http5xx > 0 || load.grantsMissingFromEvents > 0) {
      throw new Error(`HTTP load run failed its checks: ${results.at(-1)?.notes}`);
    }
    // One hot key, 100 HTTP clients against the same clients in-process (bench/http-hot.ts).
    results.push(
      ...(await hotKeyBenchmarks({
        durationMs: opts.quick ? Math.min(2000, opts.durationMs) : 30_000,
        clients: opts.quick ? 50 : 100,
        rounds: 1,
      })),
    );
  } finally {
    await Promise.all(opened.map((s) => s.close()));
    for (const p of procs) {
      p.child.kill('SIGTERM');
      await Promise.race([p.exited, new Promise((r) => setTimeout(r, 5000))]);
      killQuietly(p);
    }
    tmp.remove();
  }
  return results;
}

// Runnable on its own: node build/bench/http.js [--quick]
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const results = await httpBenchmarks({ durationMs: quick ? 1500 : 3000, quick });
  console.table(results);
}
