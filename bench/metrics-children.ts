// A micro-measurement of the server's per-operation metric updates with prom-client used
// directly: label objects looked up on every count, against children resolved once.
// Not part of `npm run bench` nor `npm test`; run by hand on a quiet machine:
//   npm run build:test && node build/bench/metrics-children.js [counts]
import { Counter, Histogram, Registry } from 'prom-client';

const counts = Number(process.argv[2] ?? 200_000);
const registry = new Registry();
const counter = new Counter({
  name: 'bench_total',
  help: 'bench',
  labelNames: ['result'],
  registers: [registry],
});
const histogram = new Histogram({
  name: 'bench_seconds',
  help: 'bench',
  labelNames: ['op', 'outcome'],
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
  registers: [registry],
});
const RESULTS = ['acquired', 'busy', 'unavailable'] as const;

function time(name: string, fn: (i: number) => void): void {
  for (let i = 0; i < counts / 10; i++) fn(i); // warm-up
  const started = performance.now();
  for (let i = 0; i < counts; i++) fn(i);
  const ns = ((performance.now() - started) * 1e6) / counts;
  console.log(`${name.padEnd(44)} ${ns.toFixed(0).padStart(6)} ns per update`);
}

const counterChildren = RESULTS.map((result) => counter.labels({ result }));
const histogramChild = histogram.labels({ op: 'acquire', outcome: 'ok' });

time('counter.inc({ result }) (labels per call)', (i) => counter.inc({ result: RESULTS[i % 3]! }));
time('counter child.inc() (resolved once)', (i) => counterChildren[i % 3]!.inc());
time('histogram.observe(labels, v) (per call)', (i) =>
  histogram.observe({ op: 'acquire', outcome: 'ok' }, (i % 100) / 1e4),
);
time('histogram child.observe(v) (resolved once)', (i) => histogramChild.observe((i % 100) / 1e4));
