import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30];

/**
 * The gateway's Prometheus metrics, in a registry of its own. Labels are bounded: results,
 * route names from the configuration (plus `unmatched`), outcomes — never scopes, tokens or
 * paths.
 */
export class GatewayMetrics {
  readonly registry: Registry;
  /** Fence decisions: applied, duplicate, stale_fence, version_mismatch, invalid, unmatched, busy, unavailable. */
  readonly decisions: Counter<'result' | 'route'>;
  /** Checks that had to write the mark store (the current token again costs none). */
  readonly markWrites: Counter<'route'>;
  /** Upstream exchanges by outcome: answered, not_sent, unknown. */
  readonly upstream: Histogram<'route' | 'outcome'>;

  /** Fenced requests queued or in flight, read at each scrape. */
  readonly inFlight: Gauge;

  constructor(options: { marksKind: string; defaultMetrics?: boolean; inFlight: () => number }) {
    const registry = new Registry();
    registry.setDefaultLabels({ marks: options.marksKind });
    this.registry = registry;
    const r = [registry];
    this.decisions = new Counter({
      name: 'leasehold_gateway_decisions_total',
      help: 'Fenced requests decided, by result and route.',
      labelNames: ['result', 'route'],
      registers: r,
    });
    this.markWrites = new Counter({
      name: 'leasehold_gateway_mark_writes_total',
      help: 'Checks that wrote the mark store (a new token, an idempotency key or a version).',
      labelNames: ['route'],
      registers: r,
    });
    this.upstream = new Histogram({
      name: 'leasehold_gateway_upstream_seconds',
      help: 'Time of each upstream exchange, by route and outcome (answered, not_sent, unknown).',
      labelNames: ['route', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers: r,
    });
    const inFlight = options.inFlight;
    this.inFlight = new Gauge({
      name: 'leasehold_gateway_fenced_in_flight',
      help: 'Fenced requests queued behind their scope or being forwarded.',
      registers: r,
      collect() {
        this.set(inFlight());
      },
    });
    if (options.defaultMetrics ?? true)
      collectDefaultMetrics({ register: registry, prefix: 'leasehold_gateway_' });
  }
}
