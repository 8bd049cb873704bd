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
  /** Requests refused for their request target, by the rule they broke (see request-target.ts). */
  readonly refusedTargets: Counter<'rule'>;

  // Counts kept as plain numbers on the request path and handed to prom-client at each scrape:
  // a labelled inc() hashes its labels every time, which showed in the gateway's profile.
  private readonly pendingDecisions = new Map<string, Map<string, Pending>>();
  private readonly pendingWrites = new Map<string, Pending>();
  private readonly upstreamLabels = new Map<string, Map<string, Labels>>();

  constructor(options: { marksKind: string; defaultMetrics?: boolean; inFlight: () => number }) {
    const registry = new Registry();
    registry.setDefaultLabels({ marks: options.marksKind });
    this.registry = registry;
    const r = [registry];
    const flush = (pending: Iterable<Pending>, counter: Counter<string>): void => {
      for (const p of pending) {
        if (p.n === 0) continue;
        counter.inc(p.labels, p.n);
        p.n = 0;
      }
    };
    const decisionsPending = this.pendingDecisions;
    const writesPending = this.pendingWrites;
    this.decisions = new Counter({
      name: 'leasehold_gateway_decisions_total',
      help: 'Fenced requests decided, by result and route.',
      labelNames: ['result', 'route'],
      registers: r,
      collect() {
        for (const byResult of decisionsPending.values()) flush(byResult.values(), this);
      },
    });
    this.markWrites = new Counter({
      name: 'leasehold_gateway_mark_writes_total',
      help: 'Checks that wrote the mark store (a new token, an idempotency key or a version).',
      labelNames: ['route'],
      registers: r,
      collect() {
        flush(writesPending.values(), this);
      },
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
    this.refusedTargets = new Counter({
      name: 'leasehold_gateway_refused_targets_total',
      help: 'Requests refused before routing because their target was not canonical, by rule.',
      labelNames: ['rule'],
      registers: r,
    });
    if (options.defaultMetrics ?? true)
      collectDefaultMetrics({ register: registry, prefix: 'leasehold_gateway_' });
  }

  /** Counts one decision (`decisions`, published at the next scrape). */
  decided(result: string, route: string): void {
    let byResult = this.pendingDecisions.get(route);
    if (byResult === undefined)
      this.pendingDecisions.set(route, (byResult = new Map<string, Pending>()));
    const p = byResult.get(result);
    if (p === undefined) byResult.set(result, { labels: { result, route }, n: 1 });
    else p.n++;
  }

  /** Counts one check that wrote the mark store (`markWrites`). */
  wroteMark(route: string): void {
    const p = this.pendingWrites.get(route);
    if (p === undefined) this.pendingWrites.set(route, { labels: { route }, n: 1 });
    else p.n++;
  }

  /** Records one upstream exchange's time (`upstream`). */
  exchanged(route: string, outcome: string, seconds: number): void {
    let byOutcome = this.upstreamLabels.get(route);
    if (byOutcome === undefined)
      this.upstreamLabels.set(route, (byOutcome = new Map<string, Labels>()));
    let labels = byOutcome.get(outcome);
    if (labels === undefined) byOutcome.set(outcome, (labels = { route, outcome }));
    this.upstream.observe(labels, seconds);
  }
}

type Labels = Record<string, string>;

interface Pending {
  readonly labels: Labels;
  n: number;
}
