// The hot-key row of the HTTP suite: many clients on one key, over a server and in-process.
//   node build/bench/http-hot.js [--seconds 10] [--clients 100] [--rounds 1]
// (for a CPU profile of the server, start `node --cpu-prof build/src/cli/main.js serve …` and
// drive it with hotKeyWindow; NODE_OPTIONS does not accept --cpu-prof)
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LeaseClient } from '../src/core/client.js';
import type { LeaseStore } from '../src/core/store.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { killQuietly, spawnCli, type CliProcess } from '../test/support/cli.js';
import { tempDir } from '../test/support/tmp.js';
import { percentile, type BenchResult } from './lib.js';

/** What one hot-key window saw. */
export interface HotWindow {
  readonly grants: number;
  readonly cyclesPerSec: number;
  /** Acquire call → release answered, waiting included (≈ clients / throughput when FIFO). */
  readonly cycleP50Ms: number;
  readonly cycleP99Ms: number;
  /** A release answered → the next grant answered: the time the key changes hands. */
  readonly handoverP50Ms: number;
  readonly handoverP99Ms: number;
  /** Acquisitions that did not end in a grant (busy after the wait, unavailable). */
  readonly failures: number;
  readonly cpuMsPer1000: number;
}

/**
 * `clients` lease clients, each with its own store from `storeFor`, loop on one key for
 * `durationMs`: acquire (waiting up to 5 s), release at once. One key, so every grant waits
 * for the release before it; the throughput is the rate at which the key changes hands.
 */
export async function hotKeyWindow(
  storeFor: (client: number) => LeaseStore,
  clients: number,
  durationMs: number,
): Promise<HotWindow> {
  const key = `bench-hot/${Math.random().toString(36).slice(2, 8)}`;
  const cycles: number[] = [];
  const events: Array<{ at: number; kind: 'granted' | 'released' }> = [];
  let failures = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + durationMs;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const client = new LeaseClient({ store: storeFor(c), ownerId: `hot-${c}` });
      try {
        while (performance.now() < until) {
          const t0 = performance.now();
          const r = await client.acquire(key, { ttl: 10_000, wait: 5000, autoRenew: false });
          if (r.status !== 'acquired') {
            failures++;
            continue;
          }
          events.push({ at: performance.now(), kind: 'granted' });
          await r.lease.release();
          const t1 = performance.now();
          events.push({ at: t1, kind: 'released' });
          cycles.push(t1 - t0);
        }
      } finally {
        await client.close();
      }
    }),
  );
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  events.sort((a, b) => a.at - b.at);
  const handovers: number[] = [];
  for (let i = 1; i < events.length; i++) {
    const prev = events[i - 1]!;
    if (prev.kind === 'released' && events[i]!.kind === 'granted') {
      handovers.push(events[i]!.at - prev.at);
    }
  }
  return {
    grants: cycles.length,
    cyclesPerSec: (cycles.length * 1000) / elapsed,
    cycleP50Ms: percentile(cycles, 50),
    cycleP99Ms: percentile(cycles, 99),
    handoverP50Ms: percentile(handovers, 50),
    handoverP99Ms: percentile(handovers, 99),
    failures,
    cpuMsPer1000: ((cpu.user + cpu.system) / 1000 / Math.max(1, cycles.length)) * 1000,
  };
}

/** Counts the server's 5xx answers so far, from its /metrics. */
export async function serverErrors(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^leasehold_http_request_seconds_count\{([^}]*)\} (\d+)/gm)) {
    if (/status="5\d\d"/.test(m[1]!)) n += Number(m[2]);
  }
  return n;
}

function hotRow(subject: string, clients: number, w: HotWindow, notes: string[]): BenchResult {
  notes.push(
    `cycle (waiting included) p50 ${w.cycleP50Ms.toFixed(1)} ms, p99 ${w.cycleP99Ms.toFixed(1)} ms; key changes hands in p50 ${w.handoverP50Ms.toFixed(2)} ms, p99 ${w.handoverP99Ms.toFixed(2)} ms`,
  );
  if (w.failures > 0) notes.push(`${w.failures} acquisitions without a grant`);
  return {
    suite: 'http',
    subject,
    scenario: 'hot key',
    workers: clients,
    keys: 'hot',
    cyclesPerSec: w.cyclesPerSec,
    p50Ms: w.cycleP50Ms,
    p99Ms: w.cycleP99Ms,
    cpuMsPer1000: w.cpuMsPer1000,
    notes: notes.join('; '),
  };
}

/**
 * The hot-key pair: `clients` HTTP clients (one `HttpLeaseStore` each, as separate processes
 * would have) through `leasehold serve` on SQLite, against the same clients in-process on one
 * SQLite store with group commit (the server's setting). Alternating windows, in-process first.
 */
export async function hotKeyBenchmarks(opts: {
  readonly durationMs: number;
  readonly clients: number;
  readonly rounds: number;
}): Promise<BenchResult[]> {
  const tmp = tempDir('bench-http-hot');
  const opened: LeaseStore[] = [];
  let proc: CliProcess | undefined;
  try {
    const direct = new SqliteLeaseStore({ path: join(tmp.dir, 'direct.db'), groupCommit: true });
    opened.push(direct);
    proc = spawnCli([
      'serve',
      '--port',
      '0',
      '--log-level',
      'warn',
      '--store',
      `sqlite:${join(tmp.dir, 'served.db')}`,
    ]);
    const url = (await proc.waitFor(/listening on (\S+)/))[1]!;
    const stores = await Promise.all(
      Array.from({ length: opts.clients }, () => HttpLeaseStore.connect({ url })),
    );
    opened.push(...stores);
    const warm = Math.min(1000, opts.durationMs);
    await hotKeyWindow(() => direct, opts.clients, warm);
    await hotKeyWindow((c) => stores[c]!, opts.clients, warm);
    const errorsBefore = await serverErrors(url);
    const local: HotWindow[] = [];
    const remote: HotWindow[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      local.push(await hotKeyWindow(() => direct, opts.clients, opts.durationMs));
      remote.push(await hotKeyWindow((c) => stores[c]!, opts.clients, opts.durationMs));
    }
    const http5xx = (await serverErrors(url)) - errorsBefore;
    const mid = (ws: HotWindow[]): HotWindow =>
      [...ws].sort((a, b) => a.cyclesPerSec - b.cyclesPerSec)[Math.floor(ws.length / 2)]!;
    const l = mid(local);
    const h = mid(remote);
    const rounds = `median of ${opts.rounds} rounds of ${opts.durationMs / 1000}s alternating`;
    return [
      hotRow('leasehold sqlite (in-process, groupCommit)', opts.clients, l, [
        rounds,
        `${opts.clients} LeaseClients on one store`,
      ]),
      hotRow('leasehold http → sqlite', opts.clients, h, [
        rounds,
        `${opts.clients} LeaseClients, one HttpLeaseStore each`,
        `${(h.cyclesPerSec / l.cyclesPerSec).toFixed(2)}× in-process`,
        `${http5xx} 5xx`,
      ]),
    ];
  } finally {
    await Promise.all(opened.map((s) => s.close()));
    if (proc !== undefined) {
      proc.child.kill('SIGTERM');
      await Promise.race([proc.exited, new Promise((r) => setTimeout(r, 5000))]);
      killQuietly(proc);
    }
    tmp.remove();
  }
}

// Runnable on its own while working on the server's speed.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name: string): string | undefined => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const results = await hotKeyBenchmarks({
    durationMs: Number(opt('--seconds') ?? 10) * 1000,
    clients: Number(opt('--clients') ?? 100),
    rounds: Number(opt('--rounds') ?? 1),
  });
  for (const r of results)
    console.log(`${r.subject}: ${r.cyclesPerSec?.toFixed(0)} cycles/s; ${r.notes}`);
}
