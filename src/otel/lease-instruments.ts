import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import { BUCKETS, LEASE_METRICS } from '../metrics/metric-names.js';
import type {
  CounterMetric,
  HistogramMetric,
  MetricLabels,
  MetricRecorder,
} from '../metrics/record.js';

/** What the observable gauges read when the SDK collects. */
export interface GaugeSources {
  /** Leases held now, by key group (`undefined` without grouping). */
  leasesHeld(): Iterable<readonly [string | undefined, number]>;
  /** 1 or 0 per attached election. */
  leaders(): Iterable<readonly [string, number]>;
}

const HISTOGRAM_BUCKETS: Readonly<Record<HistogramMetric, readonly number[]>> = {
  acquireWait: BUCKETS.wait,
  held: BUCKETS.held,
  renewalLatency: BUCKETS.latency,
  renewalSlack: BUCKETS.slack,
  fencedWrite: BUCKETS.latency,
};

/**
 * The client-side metrics as OpenTelemetry instruments: the same counters and histograms as
 * `leasehold/metrics` (see `LEASE_METRICS`), durations in seconds with the same buckets
 * suggested to the SDK, and the held-leases and leader gauges as observable gauges.
 */
export class LeaseInstruments implements MetricRecorder {
  private readonly counters: Record<CounterMetric, Counter>;
  private readonly histograms: Record<HistogramMetric, Histogram>;

  constructor(meter: Meter, sources: GaugeSources) {
    const counter = (metric: CounterMetric): Counter =>
      meter.createCounter(LEASE_METRICS[metric].otel, {
        description: LEASE_METRICS[metric].help,
      });
    const histogram = (metric: HistogramMetric): Histogram =>
      meter.createHistogram(LEASE_METRICS[metric].otel, {
        description: LEASE_METRICS[metric].help,
        unit: 's',
        advice: { explicitBucketBoundaries: [...HISTOGRAM_BUCKETS[metric]] },
      });
    this.counters = {
      acquisitions: counter('acquisitions'),
      renewals: counter('renewals'),
      losses: counter('losses'),
      releases: counter('releases'),
      fenceDecisions: counter('fenceDecisions'),
      leaderChanges: counter('leaderChanges'),
    };
    this.histograms = {
      acquireWait: histogram('acquireWait'),
      held: histogram('held'),
      renewalLatency: histogram('renewalLatency'),
      renewalSlack: histogram('renewalSlack'),
      fencedWrite: histogram('fencedWrite'),
    };
    meter
      .createObservableGauge(LEASE_METRICS.leasesHeld.otel, {
        description: LEASE_METRICS.leasesHeld.help,
      })
      .addCallback((result) => {
        for (const [group, n] of sources.leasesHeld()) {
          result.observe(n, group === undefined ? {} : { key_group: group });
        }
      });
    meter
      .createObservableGauge(LEASE_METRICS.leader.otel, { description: LEASE_METRICS.leader.help })
      .addCallback((result) => {
        for (const [election, n] of sources.leaders()) result.observe(n, { election });
      });
  }

  add(metric: CounterMetric, labels: MetricLabels): void {
    this.counters[metric].add(1, labels);
  }

  observe(metric: HistogramMetric, labels: MetricLabels, seconds: number): void {
    this.histograms[metric].record(seconds, labels);
  }
}
