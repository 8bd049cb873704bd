// `npm run bench [-- --quick] [--only sqlite,redis] [--json FILE]`: measures leasehold and the
// peers users would pick instead, in the same run, and prints a table with ratios.
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { catalogBenchmarks } from './catalog.js';
import { claimBenchmarks } from './claim.js';
import { fmt, type BenchOptions, type BenchResult } from './lib.js';
import { postgresBenchmarks } from './postgres.js';
import { etcdBenchmarks } from './etcd.js';
import { gatewayBenchmarks } from './gateway.js';
import { httpBenchmarks } from './http.js';
import { jobsBenchmarks } from './jobs.js';
import { redisBenchmarks } from './redis.js';
import { renewalBenchmarks } from './renewals.js';
import { scaleBenchmarks } from './scale.js';
import { slotBenchmarks } from './slots.js';
import { sqliteBenchmarks } from './sqlite.js';

const SUITES: Record<string, (o: BenchOptions) => Promise<BenchResult[]>> = {
  sqlite: sqliteBenchmarks,
  postgres: postgresBenchmarks,
  redis: redisBenchmarks,
  etcd: etcdBenchmarks,
  http: httpBenchmarks,
  catalog: catalogBenchmarks,
  gateway: gatewayBenchmarks,
  renewals: renewalBenchmarks,
  scale: scaleBenchmarks,
  slots: slotBenchmarks,
  jobs: jobsBenchmarks,
  claim: claimBenchmarks,
};

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const onlyAt = args.indexOf('--only');
// The scale sweep holds up to 100,000 leases per store and waits out a mass expiry: it runs
// only when named (`--only scale`).
const only =
  onlyAt >= 0
    ? (args[onlyAt + 1] ?? '').split(',')
    : Object.keys(SUITES).filter((s) => s !== 'scale');
const jsonAt = args.indexOf('--json');
// `--duration MS`: each measurement's length, for the test that checks every row still
// appears (test/e2e/bench-smoke.test.ts): a figure of 200 ms means nothing, a missing row does.
const durationAt = args.indexOf('--duration');
const durationMs = durationAt >= 0 ? Number(args[durationAt + 1]) : quick ? 1000 : 3000;
if (!Number.isSafeInteger(durationMs) || durationMs < 50) {
  throw new Error(
    `--duration takes a whole number of ms, at least 50; got ${args[durationAt + 1]}`,
  );
}
const opts: BenchOptions = { durationMs, quick };

const all: BenchResult[] = [];
for (const name of only) {
  const suite = SUITES[name];
  if (!suite)
    throw new Error(`unknown bench suite ${name}; known: ${Object.keys(SUITES).join(', ')}`);
  console.error(`bench: running ${name}…`);
  all.push(...(await suite(opts)));
}

/** Ratio of each throughput row to the suite's baseline row with the same workers and keys. */
function baselineOf(r: BenchResult): BenchResult | undefined {
  return all.find(
    (b) =>
      b.suite === r.suite &&
      b.scenario === r.scenario &&
      b.subject.startsWith('raw') &&
      b.keys === r.keys &&
      (b.workers === r.workers || b.notes?.includes('synchronous')),
  );
}

const header = [
  'suite',
  'subject',
  'scenario',
  'workers',
  'keys',
  'cycles/s',
  'vs raw',
  'p50 ms',
  'p99 ms',
  'cpu ms/1k',
  'cpu vs raw',
  'server cpu ms/1k',
];
const rows = all.map((r) => {
  const base = baselineOf(r);
  // Per-round medians where the suite has them (marked ᵣ), else the ratio of the medians.
  const ratio =
    r.ratioToRaw !== undefined
      ? `${r.ratioToRaw.toFixed(2)}×ᵣ`
      : base && r.cyclesPerSec !== undefined && base !== r
        ? `${(r.cyclesPerSec / base.cyclesPerSec!).toFixed(2)}×`
        : '';
  const cpuRatio =
    r.cpuRatioToRaw !== undefined
      ? `${r.cpuRatioToRaw.toFixed(2)}×ᵣ`
      : base && r.cpuMsPer1000 !== undefined && base.cpuMsPer1000 !== undefined && base !== r
        ? `${(r.cpuMsPer1000 / base.cpuMsPer1000).toFixed(2)}×`
        : '';
  return [
    r.suite,
    r.subject,
    r.scenario,
    String(r.workers),
    r.keys,
    fmt(r.cyclesPerSec, 0),
    ratio,
    fmt(r.p50Ms, 2),
    fmt(r.p99Ms, 2),
    fmt(r.cpuMsPer1000, 0),
    cpuRatio,
    fmt(r.serverCpuMsPer1000, 0),
  ];
});
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
console.log(
  `leasehold bench — node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${quick ? 'quick' : 'full'} run, ${new Date().toISOString()}`,
);
console.log(line(header));
for (const r of rows) console.log(line(r));
if (all.some((r) => r.ratioToRaw !== undefined)) {
  console.log(
    '\n×ᵣ: median over interleaved rounds of the ratio to the raw baseline measured in the same round',
  );
}
const noted = all.filter(
  (r) =>
    r.notes !== undefined &&
    (r.suite === 'http' ||
      r.suite === 'catalog' ||
      r.suite === 'renewals' ||
      r.suite === 'gateway'),
);
if (noted.length > 0) console.log('\nnotes:');
for (const r of noted)
  console.log(`  ${r.suite} ${r.subject} ${r.scenario} ${r.workers}w: ${r.notes}`);
if (jsonAt >= 0 && args[jsonAt + 1])
  writeFileSync(args[jsonAt + 1]!, JSON.stringify(all, null, 2) + '\n');
