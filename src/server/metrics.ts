import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { promClient } from './peers.js';

const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];
const HELD_BUCKETS = [0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 86400];
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/**
 * The server's Prometheus metrics (DESIGN §7), in a registry of its own so that several servers
 * in one process (tests) do not collide. Labels are bounded: results, verbs, routes and status
 * codes — never keys, owners or lease ids. prom-client's own counters and histograms; the
 * store-request series, timed on every store call, are resolved once per operation.
 */
export class ServerMetrics {
  readonly registry: Registry;
  readonly acquisitions: Counter<'result'>;
  readonly acquireWait: Histogram<'result'>;
  readonly renewals: Counter<'result'>;
  readonly releases: Counter<'result'>;
  readonly leasesLost: Counter<'reason'>;
  readonly timeHeld: Histogram<'end'>;
  readonly leasesTracked: Gauge;
  readonly storeRequests: Histogram<'op' | 'outcome'>;
  readonly httpRequests: Histogram<'method' | 'route' | 'status'>;
  readonly authFailures: Counter<'code'>;
  readonly sseClients: Gauge;
  readonly eventsPublished: Counter<'type'>;
  readonly fenceDecisions: Counter<'result'>;

  constructor(options: {
    storeKind: string;
    defaultMetrics?: boolean;
    /** How many leases the server tracks as live, read at each scrape. */
    liveLeases: () => number;
    /** How many acquire requests wait in the server's queues, read at each scrape. */
    waiting?: () => number;
  }) {
    const { liveLeases } = options;
    const waiting = options.waiting ?? (() => 0);
    const registry = new promClient.Registry();
    registry.setDefaultLabels({ store: options.storeKind });
    this.registry = registry;
    const r = [registry];
    this.acquisitions = new promClient.Counter({
      name: 'leasehold_acquisitions_total',
      help: 'Acquire requests answered, by result (acquired, busy, unavailable).',
      labelNames: ['result'],
      registers: r,
    });
    this.acquireWait = new promClient.Histogram({
      name: 'leasehold_acquire_wait_seconds',
      help: 'Time from an acquire request to its answer, including any bounded wait, by result.',
      labelNames: ['result'],
      buckets: WAIT_BUCKETS,
      registers: r,
    });
    this.renewals = new promClient.Counter({
      name: 'leasehold_renewals_total',
      help: 'Renew requests answered, by result (renewed, lost, not_owner, unavailable).',
      labelNames: ['result'],
      registers: r,
    });
    this.releases = new promClient.Counter({
      name: 'leasehold_releases_total',
      help: 'Release requests answered, by result (released, not_owner, unavailable).',
      labelNames: ['result'],
      registers: r,
    });
    this.leasesLost = new promClient.Counter({
      name: 'leasehold_leases_lost_total',
      help: 'Leases that ended without a release: renewal answered lost, or expiry noticed by the server.',
      labelNames: ['reason'],
      registers: r,
    });
    this.timeHeld = new promClient.Histogram({
      name: 'leasehold_lease_held_seconds',
      help: 'How long leases granted by this server were held, by how they ended (released, expired).',
      labelNames: ['end'],
      buckets: HELD_BUCKETS,
      registers: r,
    });
    this.leasesTracked = new promClient.Gauge({
      name: 'leasehold_leases_live',
      help: 'Leases granted through this server and not yet seen released or expired.',
      registers: r,
      // Read when scraped rather than set on every grant and end.
      collect() {
        this.set(liveLeases());
      },
    });
    new promClient.Gauge({
      name: 'leasehold_acquire_waiting',
      help: 'Acquire requests waiting in the queues of this server (for any key).',
      registers: r,
      collect() {
        this.set(waiting());
      },
    });
    this.storeRequests = new promClient.Histogram({
      name: 'leasehold_store_request_seconds',
      help: 'Latency of requests from the server to its lease store, by operation and outcome.',
      labelNames: ['op', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers: r,
    });
    this.httpRequests = new promClient.Histogram({
      name: 'leasehold_http_request_seconds',
      help: 'HTTP requests served, by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status'],
      buckets: LATENCY_BUCKETS,
      registers: r,
    });
    this.authFailures = new promClient.Counter({
      name: 'leasehold_auth_failures_total',
      help: 'Requests refused by authentication or authorization, by error code.',
      labelNames: ['code'],
      registers: r,
    });
    this.sseClients = new promClient.Gauge({
      name: 'leasehold_event_stream_clients',
      help: 'Open server-sent event streams.',
      registers: r,
    });
    this.eventsPublished = new promClient.Counter({
      name: 'leasehold_events_total',
      help: 'Lease events published on the event stream, by type.',
      labelNames: ['type'],
      registers: r,
    });
    this.fenceDecisions = new promClient.Counter({
      name: 'leasehold_fence_decisions_total',
      help: 'Fence decisions reported by protected resources (POST /v1/fence-decisions), by result (applied, duplicate, stale_fence).',
      labelNames: ['result'],
      registers: r,
    });
    if (options.defaultMetrics !== false) promClient.collectDefaultMetrics({ register: registry });
  }

  /** Times one store request and records it under `op`. */
  async timeStore<T>(op: string, fn: () => Promise<T>): Promise<T> {
    const started = performance.now();
    let ok = false;
    try {
      const value = await fn();
      ok = true;
      return value;
    } finally {
      this.storeRequestDone(op, ok, started);
    }
  }

  /** Records a store request of `op` started at `started` (`performance.now()`) as done now. */
  storeRequestDone(op: string, ok: boolean, started: number): void {
    const series = this.storeSeries(op);
    (ok ? series.ok : series.error).observe((performance.now() - started) / 1000);
  }

  /** The two series of `op` (ok, error), resolved once per op. */
  private readonly storeSeriesByOp = new Map<string, StoreSeries>();

  private storeSeries(op: string): StoreSeries {
    let series = this.storeSeriesByOp.get(op);
    if (series === undefined) {
      series = {
        ok: this.storeRequests.labels({ op, outcome: 'ok' }),
        error: this.storeRequests.labels({ op, outcome: 'error' }),
      };
      this.storeSeriesByOp.set(op, series);
    }
    return series;
  }
}

interface StoreSeries {
  readonly ok: Histogram.Internal<'op' | 'outcome'>;
  readonly error: Histogram.Internal<'op' | 'outcome'>;
}
