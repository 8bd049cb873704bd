import type { FencedWriteEnd } from './fence-wrap.js';
import type { LeadershipChange, LeaseObservation } from './lease-observer.js';

/** The counters, by their key in `LEASE_METRICS`. */
export type CounterMetric =
  'acquisitions' | 'renewals' | 'losses' | 'releases' | 'fenceDecisions' | 'leaderChanges';

/** The histograms (all in seconds), by their key in `LEASE_METRICS`. */
export type HistogramMetric =
  'acquireWait' | 'held' | 'renewalLatency' | 'renewalSlack' | 'fencedWrite';

/** Bounded label values: results, reasons, a key group, an election's name. */
export type MetricLabels = Readonly<Record<string, string>>;

/**
 * Where observations are counted: a prom-client registry or OpenTelemetry instruments. The
 * functions below decide what is counted, once, so both report the same metrics.
 */
export interface MetricRecorder {
  add(metric: CounterMetric, labels: MetricLabels): void;
  observe(metric: HistogramMetric, labels: MetricLabels, seconds: number): void;
}

const withGroup = (labels: Record<string, string>, group: string | undefined): MetricLabels =>
  group === undefined ? labels : { ...labels, key_group: group };

/** Counts one lease observation; `group` is the key's group, or undefined without grouping. */
export function recordLease(
  rec: MetricRecorder,
  o: LeaseObservation,
  group: string | undefined,
): void {
  switch (o.kind) {
    case 'acquire': {
      const e = o.event;
      const labels = withGroup({ result: e.type }, group);
      rec.add('acquisitions', labels);
      // An unavailable answer does not say how long it took (the event has no waitedMs).
      if (e.type !== 'unavailable') rec.observe('acquireWait', labels, e.waitedMs / 1000);
      return;
    }
    case 'renew':
      rec.add('renewals', withGroup({ result: o.result }, group));
      if (o.event.type === 'renewed') {
        rec.observe('renewalLatency', withGroup({}, group), o.event.latencyMs / 1000);
      }
      if (o.slackMs !== undefined) {
        rec.observe('renewalSlack', withGroup({}, group), o.slackMs / 1000);
      }
      return;
    case 'loss':
      rec.add('losses', withGroup({ reason: o.event.reason }, group));
      rec.observe('held', withGroup({ end: o.event.reason }, group), o.event.heldMs / 1000);
      return;
    case 'release':
      rec.add('releases', withGroup({ result: o.event.result }, group));
      if (o.heldMs !== undefined) {
        rec.observe('held', withGroup({ end: 'released' }, group), o.heldMs / 1000);
      }
      return;
  }
}

/** Counts one fenced write through a wrapped fence: its decision, and its duration. */
export function recordFencedWrite(
  rec: MetricRecorder,
  outcome: FencedWriteEnd,
  seconds: number,
  group: string | undefined,
): void {
  const labels = withGroup({ result: outcome.ok ? outcome.status : 'error' }, group);
  if (outcome.ok) rec.add('fenceDecisions', labels);
  rec.observe('fencedWrite', labels, seconds);
}

/** Counts a decision a fence reported through its `onDecision` hook (no duration known). */
export function recordFenceDecision(
  rec: MetricRecorder,
  status: string,
  group: string | undefined,
): void {
  rec.add('fenceDecisions', withGroup({ result: status }, group));
}

/** Counts a change of leadership of the election named `election`. */
export function recordLeadership(
  rec: MetricRecorder,
  election: string,
  change: LeadershipChange,
): void {
  rec.add('leaderChanges', { election, change });
}
