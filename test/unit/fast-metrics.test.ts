import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram } from '../../src/server/fast-metrics.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/** A small deterministic generator, so a failure names a reproducible sequence. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

interface Pair {
  readonly prom: Registry;
  readonly fast: Registry;
  readonly promCounter: Counter<'result'>;
  readonly fastCounter: FastCounter<'result'>;
  readonly promHistogram: Histogram<'op' | 'outcome'>;
  readonly fastHistogram: FastHistogram<'op' | 'outcome'>;
}

function pair(openMetrics = false): Pair {
  const prom = new Registry();
  const fast = new Registry();
  for (const r of [prom, fast]) {
    r.setDefaultLabels({ store: 'sqlite' });
    // The typings bind a registry's content type at construction; the registry does not.
    if (openMetrics) r.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
  }
  const counter = {
    name: 'test_results_total',
    help: 'Results, by result.',
    labelNames: ['result'] as const,
  };
  const histogram = {
    name: 'test_request_seconds',
    help: 'Latency, by op and outcome.',
    labelNames: ['op', 'outcome'] as const,
    buckets: BUCKETS,
  };
  return {
    prom,
    fast,
    promCounter: new Counter({
      ...counter,
      labelNames: [...counter.labelNames],
      registers: [prom],
    }),
    fastCounter: new FastCounter({ ...counter, registers: [fast] }),
    promHistogram: new Histogram({
      ...histogram,
      labelNames: [...histogram.labelNames],
      registers: [prom],
    }),
    fastHistogram: new FastHistogram({ ...histogram, registers: [fast] }),
  };
}

/** Drives both registries with the same increments and observations. */
function drive(p: Pair, seed: number, n: number): void {
  const rand = lcg(seed);
  const results = ['acquired', 'busy', 'unavailable', 'weird "label"\\ with\nnewline'];
  const ops = ['acquire', 'release', 'renew'];
  for (let i = 0; i < n; i++) {
    const result = results[Math.floor(rand() * results.length)]!;
    const by = Math.floor(rand() * 3);
    p.promCounter.inc({ result }, by);
    if (rand() < 0.5) p.fastCounter.inc({ result }, by);
    else p.fastCounter.child({ result }).inc(by);
    const labels = {
      op: ops[Math.floor(rand() * ops.length)]!,
      outcome: rand() < 0.9 ? 'ok' : 'error',
    };
    // Exact bounds, values between them, zero and values past the last bucket.
    const r = rand();
    const value =
      r < 0.3 ? BUCKETS[Math.floor(rand() * BUCKETS.length)]! : r < 0.35 ? 0 : rand() ** 3 * 7;
    p.promHistogram.observe(labels, value);
    if (rand() < 0.5) p.fastHistogram.observe(labels, value);
    else p.fastHistogram.child(labels).observe(value);
  }
}

describe('FastCounter and FastHistogram', () => {
  it('export exactly what prom-client metrics export after the same counts', async () => {
    for (const seed of [1, 2, 3, 42]) {
      const p = pair();
      assert.equal(await p.fast.metrics(), await p.prom.metrics(), 'before any count');
      drive(p, seed, 1 + seed * 37);
      const text = await p.fast.metrics();
      assert.equal(text, await p.prom.metrics(), `seed ${seed}`);
      assert.match(text, /test_request_seconds_bucket\{le="0\.001",store="sqlite",op="/);
      assert.deepEqual(await p.fast.getMetricsAsJSON(), await p.prom.getMetricsAsJSON());
    }
  });

  it('list series in first-use order, not in the order children were resolved', async () => {
    const p = pair();
    const late = p.fastCounter.child({ result: 'busy' });
    p.fastCounter.inc({ result: 'acquired' });
    late.inc();
    p.promCounter.inc({ result: 'acquired' });
    p.promCounter.inc({ result: 'busy' });
    const text = await p.fast.metrics();
    assert.equal(text, await p.prom.metrics());
    assert.ok(text.indexOf('result="acquired"') < text.indexOf('result="busy"'));
  });

  it('start over after resetMetrics(), with children resolved before it still counting', async () => {
    const p = pair();
    drive(p, 7, 200);
    const child = p.fastHistogram.child({ op: 'renew', outcome: 'ok' });
    p.prom.resetMetrics();
    p.fast.resetMetrics();
    assert.equal(await p.fast.metrics(), await p.prom.metrics());
    child.observe(0.003);
    p.promHistogram.observe({ op: 'renew', outcome: 'ok' }, 0.003);
    drive(p, 8, 50);
    assert.equal(await p.fast.metrics(), await p.prom.metrics());
  });

  it('export the same OpenMetrics text', async () => {
    const p = pair(true);
    drive(p, 5, 100);
    assert.equal(await p.fast.metrics(), await p.prom.metrics());
  });

  it('refuse values prom-client refuses', () => {
    const p = pair();
    assert.throws(() => p.fastHistogram.observe({ op: 'acquire', outcome: 'ok' }, Number.NaN));
    assert.throws(() => p.fastHistogram.observe({ op: 'acquire', outcome: 'ok' }, Infinity));
    assert.throws(() => p.fastCounter.inc({ result: 'acquired' }, -1));
    assert.throws(
      () =>
        new FastHistogram({
          name: 'x',
          help: 'x',
          labelNames: ['le'],
          buckets: [1],
          registers: [],
        }),
    );
  });
});
