import type * as PromClient from 'prom-client';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LeaseClient } from '../core/client.js';
import { invalidArgument } from '../core/errors.js';
import { requirePeer } from '../core/runtime/peer-packages.js';
import type { FenceDecisionHook } from '../core/fence-decision.js';
import { wrapFence, type FencedWriteEnd } from './fence-wrap.js';
import { KeyGroups, type KeyGroupOptions } from './key-groups.js';
import {
  attachLeaseClient,
  observeLeadership,
  requireElection,
  requireLeaseClient,
} from './lease-observer.js';
import {
  recordFenceDecision,
  recordFencedWrite,
  recordLease,
  recordLeadership,
  type CounterMetric,
  type HistogramMetric,
  type MetricRecorder,
} from './record.js';
import { BUCKETS, LEASE_METRICS } from './metric-names.js';

// Loaded when leasehold/metrics is first imported: without prom-client that import fails with
// an error naming the package and the command that installs it (decision 012).
const promClient = requirePeer<typeof PromClient>('prom-client', 'leasehold/metrics');

/** Options for {@link createLeaseMetrics}. */
export interface LeaseMetricsOptions extends KeyGroupOptions {
  /** Where the metrics are registered. Defaults to prom-client's global registry. */
  readonly registry?: Registry;
}

/** An election as the collector needs it: `Election` from `leasehold` fits. */
export interface ElectionLike {
  readonly name: string;
  readonly key: string;
}

type Labels = 'result' | 'reason' | 'end' | 'key_group' | 'election' | 'change';

/**
 * Prometheus metrics for leasehold's client side, fed by lease clients' events: acquisitions,
 * wait and hold times, renewals, renewal slack, losses, releases, fence decisions and
 * leadership. Labels are bounded: results, reasons and (optionally) a key group — never keys,
 * owners, lease ids or tokens. See docs/metrics.md for every metric.
 *
 * One collector may watch several clients; two collectors on one registry share the metrics.
 *
 * @example
 * import { createLeaseMetrics } from 'leasehold/metrics';
 * const metrics = createLeaseMetrics({ keyGroup: (key) => key.split('/')[0] });
 * const detach = metrics.attach(client);
 * const fence = metrics.wrapFence(new PostgresFence({ pool }));
 * app.get('/metrics', async () => metrics.registry.metrics());
 */
export class LeaseMetrics {
  /** The registry the metrics are in. */
  readonly registry: Registry;
  /**
   * A hook to give any fence as its `onDecision` option (for fences you do not call yourself,
   * such as the HTTP fence or the gateway): counts decisions, without durations.
   */
  readonly onFenceDecision: FenceDecisionHook;
  private readonly groups: KeyGroups;
  private readonly recorder: MetricRecorder;
  private readonly leader: Gauge<Labels>;
  /** The clients attached to any collector on this registry: the held-leases gauge counts them. */
  private readonly clients: Set<LeaseClient>;

  constructor(options: LeaseMetricsOptions = {}) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    const registry = options.registry ?? promClient.register;
    if (typeof registry?.getSingleMetric !== 'function')
      throw invalidArgument('registry', 'must be a prom-client Registry', registry);
    this.registry = registry;
    let clients = clientsByRegistry.get(registry);
    if (clients === undefined) clientsByRegistry.set(registry, (clients = new Set()));
    this.clients = clients;
    this.groups = new KeyGroups(options);
    const g: Labels[] = this.groups.enabled ? ['key_group'] : [];
    const counter = (m: Metric, labels: Labels[]): Counter<Labels> =>
      this.reuse(
        m,
        labels,
        () => new promClient.Counter({ ...spec(m, labels), registers: [registry] }),
      );
    const histogram = (
      m: Metric,
      labels: Labels[],
      buckets: readonly number[],
    ): Histogram<Labels> =>
      this.reuse(
        m,
        labels,
        () =>
          new promClient.Histogram({
            ...spec(m, labels),
            buckets: [...buckets],
            registers: [registry],
          }),
      );
    // Labels as they appear on each metric; key_group only when a keyGroup is given.
    const counters: Record<CounterMetric, Counter<Labels>> = {
      acquisitions: counter(LEASE_METRICS.acquisitions, ['result', ...g]),
      renewals: counter(LEASE_METRICS.renewals, ['result', ...g]),
      losses: counter(LEASE_METRICS.losses, ['reason', ...g]),
      releases: counter(LEASE_METRICS.releases, ['result', ...g]),
      fenceDecisions: counter(LEASE_METRICS.fenceDecisions, ['result', ...g]),
      leaderChanges: counter(LEASE_METRICS.leaderChanges, ['election', 'change']),
    };
    const histograms: Record<HistogramMetric, Histogram<Labels>> = {
      acquireWait: histogram(LEASE_METRICS.acquireWait, ['result', ...g], BUCKETS.wait),
      held: histogram(LEASE_METRICS.held, ['end', ...g], BUCKETS.held),
      renewalLatency: histogram(LEASE_METRICS.renewalLatency, g, BUCKETS.latency),
      renewalSlack: histogram(LEASE_METRICS.renewalSlack, g, BUCKETS.slack),
      fencedWrite: histogram(LEASE_METRICS.fencedWrite, ['result', ...g], BUCKETS.latency),
    };
    this.recorder = {
      add: (metric, labels) => counters[metric].inc(labels),
      observe: (metric, labels, seconds) => histograms[metric].observe(labels, seconds),
    };
    this.leader = this.reuse(
      LEASE_METRICS.leader,
      ['election'],
      () =>
        new promClient.Gauge({
          ...spec(LEASE_METRICS.leader, ['election']),
          registers: [registry],
        }),
    );
    const groups = this.groups;
    this.reuse(
      LEASE_METRICS.leasesHeld,
      g,
      () =>
        new promClient.Gauge({
          ...spec(LEASE_METRICS.leasesHeld, g),
          registers: [registry],
          // Counted when scraped, from the clients themselves, rather than kept in step with
          // every grant and end.
          collect() {
            this.reset();
            if (!groups.enabled) {
              let n = 0;
              for (const c of clients) n += c.heldLeases().length;
              this.set(n);
              return;
            }
            const counts = new Map<string, number>();
            for (const c of clients) {
              for (const lease of c.heldLeases()) {
                const group = groups.of(lease.key) ?? '';
                counts.set(group, (counts.get(group) ?? 0) + 1);
              }
            }
            for (const [group, n] of counts) this.set({ key_group: group }, n);
          },
        }),
    );
    this.onFenceDecision = (d) => {
      // Claims are not writes: the decisions counter counts writes only.
      if (d.op === 'claim') return;
      recordFenceDecision(this.recorder, d.status, this.groups.of(d.scope));
    };
  }

  /**
   * Starts counting `client`'s acquisitions, renewals, losses and releases. Returns a function
   * that stops (safe to call more than once). Leases the client already holds are picked up.
   */
  attach(client: LeaseClient): () => void {
    return attachLeaseClient(this.clients, client, (o) =>
      recordLease(this.recorder, o, this.groups.of(o.event.key)),
    );
  }

  /**
   * Starts counting this process's leadership of `election` (its candidates use `client`):
   * `leasehold_client_leader{election}` and its changes. The election's name becomes a label
   * value, so attach only elections you have few of. Returns a function that stops.
   */
  attachElection(client: LeaseClient, election: ElectionLike): () => void {
    requireLeaseClient(client);
    requireElection(election);
    const labels = { election: election.name };
    this.leader.set(labels, client.heldLeases().some((l) => l.key === election.key) ? 1 : 0);
    return observeLeadership(client, election.key, (change) => {
      recordLeadership(this.recorder, election.name, change);
      this.leader.set(labels, change === 'elected' ? 1 : 0);
    });
  }

  /**
   * Wraps a fence (`SqliteFence`, `PostgresFence`, `RedisFence`) so that its fenced writes
   * are counted by result and timed. Returns a fence of the same type; the original keeps
   * working unwatched.
   */
  wrapFence<F extends object>(fence: F): F {
    return wrapFence(fence, {
      start: ({ scope }) => {
        const startedAt = performance.now();
        return {
          run: (write) => write(),
          end: (outcome: FencedWriteEnd) => {
            const seconds = (performance.now() - startedAt) / 1000;
            recordFencedWrite(this.recorder, outcome, seconds, this.groups.of(scope));
          },
        };
      },
    });
  }

  /** The metric already in the registry (a second collector), or a new one. */
  private reuse<M>(m: Metric, labels: Labels[], create: () => M): M {
    const existing = this.registry.getSingleMetric(m.prometheus) as
      (M & { labelNames?: readonly string[] }) | undefined;
    if (existing === undefined) return create();
    const have = [...(existing.labelNames ?? [])].sort().join(',');
    if (have !== [...labels].sort().join(',')) {
      throw invalidArgument(
        'registry',
        `already has ${m.prometheus} with labels [${have}]; collectors on one registry must agree on keyGroup (want [${[...labels].sort().join(',')}])`,
        this.registry,
      );
    }
    return existing;
  }
}

/** Collectors sharing a registry share its held-leases gauge, so they share its clients too. */
const clientsByRegistry = new WeakMap<Registry, Set<LeaseClient>>();

type Metric = (typeof LEASE_METRICS)[keyof typeof LEASE_METRICS];

function spec(m: Metric, labels: Labels[]): { name: string; help: string; labelNames: Labels[] } {
  return { name: m.prometheus, help: m.help, labelNames: labels };
}

/**
 * Creates the client-side Prometheus collector; see {@link LeaseMetrics}.
 *
 * @example
 * const metrics = createLeaseMetrics({ registry });
 * const detach = metrics.attach(client);
 */
export function createLeaseMetrics(options: LeaseMetricsOptions = {}): LeaseMetrics {
  return new LeaseMetrics(options);
}
