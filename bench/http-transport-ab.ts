// The HTTP store's own transport against undici's Pool and Node's http keep-alive client, in
// one process against one `leasehold serve` (SQLite), in interleaved rounds:
//   node build/bench/http-transport-ab.js [--rounds 5] [--seconds 2] [--clients 1,32]
// Each subject is the same HttpLeaseStore with only its request transport swapped; a cycle is
// an acquire and a release. Prints medians of cycles/s and client CPU µs per cycle, and each
// subject's ratio to the store's own transport in the same round.
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { LeaseClient } from '../src/core/client.js';
import type { RequestTransport } from '../src/stores/http/client.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { killQuietly } from '../test/support/cli.js';
import { startServe } from './serve.js';
import { tempDir } from '../test/support/tmp.js';
import { NodeKeepAliveTransport, UndiciPoolTransport } from './http-transports.js';
import { percentile } from './lib.js';

const args = process.argv.slice(2);
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const rounds = Number(opt('--rounds') ?? 5);
const windowMs = Number(opt('--seconds') ?? 2) * 1000;
const clientCounts = (opt('--clients') ?? '1,32').split(',').map(Number);

type Subject = 'own' | 'undici Pool' | 'node:http keep-alive';
const SUBJECTS: readonly Subject[] = ['own', 'undici Pool', 'node:http keep-alive'];

async function storeWith(url: string, subject: Subject): Promise<HttpLeaseStore> {
  const store = await HttpLeaseStore.connect({ url });
  if (subject !== 'own') {
    // The one field the store sends its requests through; swapped for the measurement only.
    const slot = store as unknown as { calls: RequestTransport };
    slot.calls.close();
    slot.calls =
      subject === 'undici Pool'
        ? new UndiciPoolTransport(new URL(url))
        : new NodeKeepAliveTransport(new URL(url));
  }
  return store;
}

async function window(
  store: HttpLeaseStore,
  workers: number,
): Promise<{ perSec: number; cpuUsPerCycle: number; p99Ms: number }> {
  const latencies: number[] = [];
  const run = Math.random().toString(36).slice(2, 8);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const until = t0 + windowMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const client = new LeaseClient({ store, ownerId: `t-${w}` });
      const key = `transport-ab/${run}/${w}`;
      while (performance.now() < until) {
        const s = performance.now();
        const r = await client.acquire(key, { ttl: 10_000, autoRenew: false });
        if (r.status !== 'acquired') throw new Error(`not acquired: ${r.status}`);
        await r.lease.release();
        latencies.push(performance.now() - s);
      }
      await client.close();
    }),
  );
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    perSec: (latencies.length / elapsed) * 1000,
    cpuUsPerCycle: (cpu.user + cpu.system) / Math.max(1, latencies.length),
    p99Ms: percentile(latencies, 99),
  };
}

const median = (xs: number[]): number => percentile(xs, 50);

const tmp = tempDir('bench-transport-ab');
const { url, proc: server } = await startServe(`sqlite:${join(tmp.dir, 'ab.db')}`);
try {
  const stores = new Map<Subject, HttpLeaseStore>();
  for (const s of SUBJECTS) stores.set(s, await storeWith(url, s));
  for (const workers of clientCounts) {
    await window(stores.get('own')!, workers); // warm-up
    const per = new Map<Subject, { perSec: number[]; cpu: number[]; p99: number[] }>();
    const ratios = new Map<Subject, { perSec: number[]; cpu: number[] }>();
    for (const s of SUBJECTS) {
      per.set(s, { perSec: [], cpu: [], p99: [] });
      ratios.set(s, { perSec: [], cpu: [] });
    }
    for (let r = 0; r < rounds; r++) {
      // Rotate the order so no subject always runs first in a round.
      const order = SUBJECTS.map((_, i) => SUBJECTS[(i + r) % SUBJECTS.length]!);
      const round = new Map<Subject, { perSec: number; cpuUsPerCycle: number; p99Ms: number }>();
      for (const s of order) round.set(s, await window(stores.get(s)!, workers));
      const own = round.get('own')!;
      for (const [s, m] of round) {
        per.get(s)!.perSec.push(m.perSec);
        per.get(s)!.cpu.push(m.cpuUsPerCycle);
        per.get(s)!.p99.push(m.p99Ms);
        ratios.get(s)!.perSec.push(m.perSec / own.perSec);
        ratios.get(s)!.cpu.push(m.cpuUsPerCycle / own.cpuUsPerCycle);
      }
    }
    for (const s of SUBJECTS) {
      const m = per.get(s)!;
      const q = ratios.get(s)!;
      console.log(
        `${workers} client(s) ${s.padEnd(22)} ${median(m.perSec).toFixed(0).padStart(6)} cycles/s ` +
          `(${median(q.perSec).toFixed(2)}x own)  client CPU ${median(m.cpu).toFixed(0).padStart(4)} µs/cycle ` +
          `(${median(q.cpu).toFixed(2)}x own)  p99 ${median(m.p99).toFixed(2)} ms`,
      );
    }
  }
  for (const s of stores.values()) await s.close();
  console.log(
    `load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}, ${rounds} rounds of ${windowMs} ms`,
  );
} finally {
  killQuietly(server);
  tmp.remove();
}
