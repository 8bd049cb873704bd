import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { LeaseClient, type Lease } from '../../src/index.js';
import { PostgresFence } from '../../src/fencing/postgres.js';
import { createLeaseTelemetry, SPAN_ATTRIBUTES as A, SPAN_NAMES } from '../../src/otel/index.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/index.js';
import { PostgresLeaseStore } from '../../src/stores/postgres/index.js';
import { ManualClock } from '../../src/testing.js';
import { freePort } from '../support/ports.js';
import { AsyncLocalContextManager } from './async-context.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';

const TTL = 1000;
const DEADLINE = 988;

function leaseOf(r: Awaited<ReturnType<LeaseClient['acquire']>>): Lease {
  assert.equal(r.status, 'acquired');
  return (r as { lease: Lease }).lease;
}

/** The SDK's in-memory exporters behind leasehold's instrumentation. */
function sdk() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spans)],
  });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exported only when flushed: the interval is longer than the test.
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const collect = async (): Promise<MetricData[]> => {
    exporter.reset();
    await reader.forceFlush();
    return exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
  };
  const shutdown = async (): Promise<void> => {
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
  };
  return { spans, tracerProvider, meterProvider, collect, shutdown };
}

function point(
  metrics: readonly MetricData[],
  name: string,
  attributes: Record<string, string>,
): DataPoint<unknown> | undefined {
  const metric = metrics.find((m) => m.descriptor.name === name);
  const want = Object.entries(attributes);
  return (metric?.dataPoints as DataPoint<unknown>[] | undefined)?.find(
    (p) =>
      Object.keys(p.attributes).length === want.length &&
      want.every(([k, v]) => p.attributes[k] === v),
  );
}

const sum = (m: readonly MetricData[], name: string, attrs: Record<string, string> = {}): number =>
  (point(m, name, attrs)?.value as number | undefined) ?? 0;

const histogram = (m: readonly MetricData[], name: string, attrs: Record<string, string> = {}) =>
  point(m, name, attrs)?.value as Histogram | undefined;

const named = (spans: readonly ReadableSpan[], name: string): ReadableSpan[] =>
  spans.filter((s) => s.name === name);

describe('leasehold/otel with the OpenTelemetry SDK in-memory exporters', () => {
  const schema = uniqueSchema('otel');
  let pool: pg.Pool;
  before(() => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    context.setGlobalContextManager(new AsyncLocalContextManager());
  });
  after(async () => {
    context.disable();
    await pool.end();
    await dropSchema(schema);
  });

  it('makes one span per acquire, renew, release and fenced write, with key, token and owner', async () => {
    const { spans, tracerProvider, meterProvider, collect, shutdown } = sdk();
    const storeClock = new ManualClock();
    const clockA = new ManualClock();
    const state = new MemoryLeaseState();
    const a = new LeaseClient({
      store: new MemoryLeaseStore({ clock: storeClock, state }),
      clock: clockA,
      ownerId: 'worker-a',
    });
    const b = new LeaseClient({
      store: new MemoryLeaseStore({ clock: storeClock, state }),
      clock: storeClock,
      ownerId: 'worker-b',
    });
    // A store nobody listens on: acquisitions through it are answered `unavailable`.
    const deadStore = new PostgresLeaseStore({
      connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/test`,
      autoMigrate: false,
    });
    const c = new LeaseClient({ store: deadStore, ownerId: 'worker-c', requestTimeout: '2s' });
    const fenceDb = new PostgresFence({ pool, schema });
    try {
      const telemetry = createLeaseTelemetry({ tracerProvider, meterProvider });
      const detach = [telemetry.attach(a), telemetry.attach(b), telemetry.attach(c)];
      const fence = telemetry.wrapFence(fenceDb, { ownerId: b.ownerId });
      const fenceA = telemetry.wrapFence(fenceDb, { ownerId: a.ownerId });
      assert.ok(fence instanceof PostgresFence);

      // The application's own spans, active around the calls.
      const app = tracerProvider.getTracer('app');
      const inSpan = <T>(name: string, fn: () => Promise<T>): Promise<[T, string]> =>
        app.startActiveSpan(name, async (span) => {
          try {
            const value = await fn();
            return [value, span.spanContext().spanId] as [T, string];
          } finally {
            span.end();
          }
        });
      const [acquiredA, jobSpan] = await inSpan('job', () =>
        a.acquire('report/july', { ttl: TTL, renewEvery: 300 }),
      );
      const leaseA = leaseOf(acquiredA);
      assert.equal((await b.acquire('report/july', { ttl: TTL })).status, 'busy');
      await inSpan('tick', () => clockA.advance(300)); // A renews with 688 ms left
      await storeClock.advance(2000); // the store's clock jumps: A's lease expires there
      const leaseB = leaseOf(await b.acquire('report/july', { ttl: TTL, autoRenew: false }));
      await clockA.advance(300); // A's renewal is answered lost
      assert.equal(leaseA.lossReason, 'lost');
      assert.equal((await c.acquire('report/july', { ttl: TTL })).status, 'unavailable');

      const activeInWrite: (string | undefined)[] = [];
      const write =
        (body: string) => (tx: { query: (q: string, v: unknown[]) => Promise<unknown> }) => {
          activeInWrite.push(trace.getActiveSpan()?.spanContext().spanId);
          return tx.query(`SELECT $1::text AS body`, [body]);
        };
      const applied = await fence.write({ scope: 'report/july', token: leaseB.token }, write('B'));
      assert.equal(applied.status, 'applied');
      const stale = await fenceA.write({ scope: 'report/july', token: leaseA.token }, write('A'));
      assert.deepEqual(stale, { status: 'stale_fence', highWaterMark: 2n });
      await assert.rejects(
        fence.write({ scope: 'report/july', token: leaseB.token }, () => {
          throw new Error('constraint violated');
        }),
        /constraint violated/,
      );

      assert.equal((await leaseA.release()).status, 'not_owner');
      await storeClock.advance(100);
      assert.equal((await leaseB.release()).status, 'released');

      const all = spans.getFinishedSpans();
      // acquire: A acquired, B busy, B acquired, C unavailable.
      const acquires = named(all, SPAN_NAMES.acquire);
      assert.deepEqual(
        acquires.map((s) => [s.attributes[A.owner], s.attributes[A.result], s.attributes[A.token]]),
        [
          ['worker-a', 'acquired', '1'],
          ['worker-b', 'busy', undefined],
          ['worker-b', 'acquired', '2'],
          ['worker-c', 'unavailable', undefined],
        ],
      );
      for (const s of acquires) assert.equal(s.attributes[A.key], 'report/july');
      assert.equal(
        acquires[0]!.parentSpanContext?.spanId,
        jobSpan,
        'an acquisition is a child of the span active where it was called',
      );
      assert.equal(acquires[1]!.attributes[A.holderOwner], 'worker-a');
      assert.equal(acquires[1]!.attributes[A.holderToken], '1');
      assert.equal(acquires[3]!.status.code, SpanStatusCode.ERROR);
      assert.equal(acquires[0]!.status.code, SpanStatusCode.UNSET);

      const renews = named(all, SPAN_NAMES.renew);
      assert.deepEqual(
        renews.map((s) => [s.attributes[A.owner], s.attributes[A.token], s.attributes[A.result]]),
        [
          ['worker-a', '1', 'renewed'],
          ['worker-a', '1', 'lost'],
        ],
      );
      assert.equal(renews[0]!.attributes[A.slackMs], DEADLINE - 300);
      for (const r of renews) {
        assert.equal(
          r.parentSpanContext,
          undefined,
          'a renewal is a root span, even inside "tick"',
        );
        assert.deepEqual(
          r.links.map((l) => l.context.spanId),
          [acquires[0]!.spanContext().spanId],
          "linked to its lease's acquisition",
        );
      }

      const releases = named(all, SPAN_NAMES.release);
      assert.deepEqual(
        releases.map((s) => [s.attributes[A.owner], s.attributes[A.token], s.attributes[A.result]]),
        [
          ['worker-a', '1', 'not_owner'],
          ['worker-b', '2', 'released'],
        ],
      );
      assert.equal(releases[0]!.attributes[A.heldMs], undefined, 'time held ended at the loss');
      assert.equal(releases[1]!.attributes[A.heldMs], 100);

      const writes = named(all, SPAN_NAMES.fencedWrite);
      assert.deepEqual(
        writes.map((s) => [
          s.attributes[A.scope],
          s.attributes[A.token],
          s.attributes[A.owner],
          s.attributes[A.result],
        ]),
        [
          ['report/july', '2', 'worker-b', 'applied'],
          ['report/july', '1', 'worker-a', 'stale_fence'],
          ['report/july', '2', 'worker-b', 'error'],
        ],
      );
      assert.equal(writes[1]!.attributes[A.highWaterMark], '2');
      assert.deepEqual(
        activeInWrite,
        [writes[0]!.spanContext().spanId],
        'the fenced-write span is active inside the write (the stale one never ran)',
      );
      assert.equal(writes[2]!.status.code, SpanStatusCode.ERROR);
      assert.equal(writes[2]!.events[0]?.name, 'exception');
      const app2 = all.filter((x) => x.instrumentationScope.name === 'app').length;
      assert.equal(app2, 2, "the app's own spans");
      assert.equal(
        all.length - app2,
        acquires.length + renews.length + releases.length + writes.length,
        'no other spans',
      );

      const m = await collect();
      assert.equal(sum(m, 'leasehold.client.acquisitions', { result: 'acquired' }), 2);
      assert.equal(sum(m, 'leasehold.client.acquisitions', { result: 'busy' }), 1);
      assert.equal(sum(m, 'leasehold.client.acquisitions', { result: 'unavailable' }), 1);
      assert.equal(sum(m, 'leasehold.client.renewals', { result: 'renewed' }), 1);
      assert.equal(sum(m, 'leasehold.client.renewals', { result: 'lost' }), 1);
      assert.equal(sum(m, 'leasehold.client.leases.lost', { reason: 'lost' }), 1);
      assert.equal(sum(m, 'leasehold.client.releases', { result: 'not_owner' }), 1);
      assert.equal(sum(m, 'leasehold.client.releases', { result: 'released' }), 1);
      assert.equal(sum(m, 'leasehold.client.fence.decisions', { result: 'applied' }), 1);
      assert.equal(sum(m, 'leasehold.client.fence.decisions', { result: 'stale_fence' }), 1);
      assert.equal(
        histogram(m, 'leasehold.client.fenced_write.duration', { result: 'error' })?.count,
        1,
      );
      const slack = histogram(m, 'leasehold.client.renewal.slack');
      assert.equal(slack?.count, 1);
      assert.equal(slack?.sum, (DEADLINE - 300) / 1000);
      const held = histogram(m, 'leasehold.client.lease.held', { end: 'released' });
      assert.equal(held?.count, 1, 'only B ended by release; A was lost first');
      assert.equal(held?.sum, 0.1);
      assert.equal(histogram(m, 'leasehold.client.lease.held', { end: 'lost' })?.sum, 0.6);
      const wait = m.find((x) => x.descriptor.name === 'leasehold.client.acquire.wait');
      assert.equal(wait?.descriptor.unit, 's');
      assert.equal(wait?.dataPointType, DataPointType.HISTOGRAM);
      assert.equal(sum(m, 'leasehold.client.leases.held', {}), 0);
      const bounded = new Set(['result', 'reason', 'end', 'key_group', 'election', 'change']);
      for (const metric of m) {
        for (const p of metric.dataPoints) {
          for (const k of Object.keys(p.attributes))
            assert.ok(bounded.has(k), `${metric.descriptor.name} has ${k}`);
        }
      }
      for (const d of detach) d();
    } finally {
      await a.close();
      await b.close();
      await c.close();
      await deadStore.close();
      await fenceDb.close();
      await shutdown();
    }
    assert.equal(storeClock.pendingTimers() + clockA.pendingTimers(), 0, 'no timer left');
  });

  it('records no spans with traces off, and no metrics with metrics off', async () => {
    const { spans, tracerProvider, meterProvider, collect, shutdown } = sdk();
    const clock = new ManualClock();
    const client = new LeaseClient({ store: new MemoryLeaseStore({ clock }), clock });
    try {
      const metricsOnly = createLeaseTelemetry({ tracerProvider, meterProvider, traces: false });
      const stop = metricsOnly.attach(client);
      leaseOf(await client.acquire('job/1', { ttl: TTL }));
      assert.equal(spans.getFinishedSpans().length, 0);
      const m = await collect();
      assert.equal(sum(m, 'leasehold.client.acquisitions', { result: 'acquired' }), 1);
      assert.equal(sum(m, 'leasehold.client.leases.held', {}), 1);
      stop();
      const tracesOnly = createLeaseTelemetry({ tracerProvider, meterProvider, metrics: false });
      const stop2 = tracesOnly.attach(client);
      leaseOf(await client.acquire('job/2', { ttl: TTL }));
      assert.equal(named(spans.getFinishedSpans(), SPAN_NAMES.acquire).length, 1);
      const after = await collect();
      assert.equal(sum(after, 'leasehold.client.acquisitions', { result: 'acquired' }), 1);
      stop2();
    } finally {
      await client.close();
      await shutdown();
    }
  });
});
