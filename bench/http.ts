import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LeaseClient } from '../src/core/client.js';
import type { LeaseStore } from '../src/core/store.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { spawnCli, killQuietly, type CliProcess } from '../test/support/cli.js';
import { runHttpLoad } from '../test/support/http-load.js';
import { tempDir } from '../test/support/tmp.js';
import type { BenchOptions, BenchResult } from './lib.js';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

/** `workers` clients each acquire+release their own key in a loop for `durationMs`. */
async function cycles(
  subject: string,
  stores: LeaseStore[],
  workers: number,
  durationMs: number,
  notes?: string,
): Promise<BenchResult> {
  const latencies: number[] = [];
  const run = Math.random().toString(36).slice(2, 8);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + durationMs;
  let failures = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const client = new LeaseClient({ store: stores[w % stores.length]!, ownerId: `bench-${w}` });
      const key = `bench/${run}/${w}`;
      while (performance.now() < until) {
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
    suite: 'http',
    subject,
    scenario: 'cycle',
    workers,
    keys: 'distinct',
    cyclesPerSec: (n * 1000) / elapsed,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    cpuMsPer1000: n === 0 ? undefined : ((cpu.user + cpu.system) / 1000 / n) * 1000,
    notes:
      [notes, failures > 0 ? `${failures} failed attempts` : undefined]
        .filter(Boolean)
        .join('; ') || undefined,
  };
}

async function startServer(args: string[]): Promise<{ url: string; proc: CliProcess }> {
  const proc = spawnCli(['serve', '--port', '0', '--log-level', 'warn', ...args]);
  const url = (await proc.waitFor(/listening on (\S+)/))[1]!;
  return { url, proc };
}

/**
 * The HTTP server's benchmarks: acquire+release over HTTP (server in its own process, on
 * SQLite and on memory) against the same cycle on in-process SQLite at 32 clients, and a
 * bounded load run (100 clients on hot keys, 30 s unless quick) that checks the history.
 */
export async function httpBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const tmp = tempDir('bench-http');
  const procs: CliProcess[] = [];
  try {
    const workers = 32;
    const direct = new SqliteLeaseStore({ path: join(tmp.dir, 'direct.db') });
    try {
      results.push(
        await cycles('leasehold sqlite (in-process)', [direct], workers, opts.durationMs),
      );
    } finally {
      await direct.close();
    }

    const sqliteServer = await startServer(['--store', `sqlite:${join(tmp.dir, 'served.db')}`]);
    procs.push(sqliteServer.proc);
    const httpStores = await Promise.all(
      Array.from({ length: 4 }, () => HttpLeaseStore.connect({ url: sqliteServer.url })),
    );
    results.push(
      await cycles(
        'leasehold http → sqlite',
        httpStores,
        workers,
        opts.durationMs,
        'server in its own process; client CPU only',
      ),
    );
    await Promise.all(httpStores.map((s) => s.close()));

    const memoryServer = await startServer(['--store', 'memory:']);
    procs.push(memoryServer.proc);
    const memStores = await Promise.all(
      Array.from({ length: 4 }, () => HttpLeaseStore.connect({ url: memoryServer.url })),
    );
    results.push(
      await cycles(
        'leasehold http → memory',
        memStores,
        workers,
        opts.durationMs,
        'HTTP overhead without fsync',
      ),
    );
    await Promise.all(memStores.map((s) => s.close()));

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
  } finally {
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
  const base =
    results.find((r) => r.subject.startsWith('leasehold sqlite'))?.cyclesPerSec ?? Number.NaN;
  const http =
    results.find((r) => r.subject === 'leasehold http → sqlite' && r.scenario === 'cycle')
      ?.cyclesPerSec ?? Number.NaN;
  console.log(`http→sqlite / in-process sqlite at 32 clients: ${(http / base).toFixed(2)}×`);
}
