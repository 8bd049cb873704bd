import { metrics, trace, type MeterProvider, type TracerProvider } from '@opentelemetry/api';
import type { LeaseClient } from '../core/client.js';
import { invalidArgument } from '../core/errors.js';
import type { FenceDecisionHook } from '../core/fence-decision.js';
import { wrapFence, type FenceWatcher } from '../metrics/fence-wrap.js';
import { KeyGroups, type KeyGroupOptions } from '../metrics/key-groups.js';
import type { ElectionLike } from '../metrics/lease-metrics.js';
import {
  attachLeaseClient,
  observeLeadership,
  requireElection,
  requireLeaseClient,
} from '../metrics/lease-observer.js';
import {
  recordFenceDecision,
  recordFencedWrite,
  recordLease,
  recordLeadership,
} from '../metrics/record.js';
import { LeaseInstruments } from './lease-instruments.js';
import { LeaseSpans } from './lease-spans.js';

/** The instrumentation scope name of leasehold's tracer and meter. */
export const INSTRUMENTATION_SCOPE = 'leasehold';

/** Options for {@link createLeaseTelemetry}. */
export interface LeaseTelemetryOptions extends KeyGroupOptions {
  /** Where spans go. Defaults to the global tracer provider (`trace.getTracerProvider()`). */
  readonly tracerProvider?: TracerProvider;
  /** Where metrics go. Defaults to the global meter provider (`metrics.getMeterProvider()`). */
  readonly meterProvider?: MeterProvider;
  /** Make spans. Defaults to true. */
  readonly traces?: boolean;
  /** Record metrics. Defaults to true. */
  readonly metrics?: boolean;
}

/** Options for {@link LeaseTelemetry.wrapFence}. */
export interface FenceTelemetryOptions {
  /** The writer's owner id, added to its fenced-write spans (e.g. `client.ownerId`). Defaults to none. */
  readonly ownerId?: string;
}

/**
 * OpenTelemetry for leasehold's client side: spans for acquisitions, renewals, releases and
 * fenced writes (with key, token and owner attributes), and the same metrics as
 * `leasehold/metrics` as OpenTelemetry instruments. Uses only `@opentelemetry/api`; bring
 * your own SDK. See docs/metrics.md.
 *
 * @example
 * import { createLeaseTelemetry } from 'leasehold/otel';
 * const telemetry = createLeaseTelemetry(); // the global providers your SDK registered
 * const detach = telemetry.attach(client);
 * const fence = telemetry.wrapFence(new PostgresFence({ pool }), { ownerId: client.ownerId });
 */
export class LeaseTelemetry {
  /**
   * A hook to give any fence as its `onDecision` option (for fences you do not call yourself):
   * counts decisions, without spans or durations.
   */
  readonly onFenceDecision: FenceDecisionHook;
  private readonly groups: KeyGroups;
  private readonly spans: LeaseSpans | undefined;
  private readonly instruments: LeaseInstruments | undefined;
  private readonly clients = new Set<LeaseClient>();
  private readonly leaders = new Map<string, number>();

  constructor(options: LeaseTelemetryOptions = {}) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    for (const flag of ['traces', 'metrics'] as const) {
      const v = options[flag];
      if (v !== undefined && typeof v !== 'boolean')
        throw invalidArgument(flag, 'must be a boolean', v);
    }
    this.groups = new KeyGroups(options);
    if (options.traces !== false) {
      const provider = options.tracerProvider ?? trace.getTracerProvider();
      if (typeof provider?.getTracer !== 'function')
        throw invalidArgument(
          'tracerProvider',
          'must be an OpenTelemetry TracerProvider',
          provider,
        );
      this.spans = new LeaseSpans(provider.getTracer(INSTRUMENTATION_SCOPE));
    }
    if (options.metrics !== false) {
      const provider = options.meterProvider ?? metrics.getMeterProvider();
      if (typeof provider?.getMeter !== 'function')
        throw invalidArgument('meterProvider', 'must be an OpenTelemetry MeterProvider', provider);
      this.instruments = new LeaseInstruments(provider.getMeter(INSTRUMENTATION_SCOPE), {
        leasesHeld: () => this.heldByGroup(),
        leaders: () => this.leaders,
      });
    }
    this.onFenceDecision = (d) => {
      // Claims are not writes: the decisions counter counts writes only.
      if (this.instruments !== undefined && d.op !== 'claim')
        recordFenceDecision(this.instruments, d.status, this.groups.of(d.scope));
    };
  }

  /** Starts tracing and measuring `client`. Returns a function that stops (safe to call twice). */
  attach(client: LeaseClient): () => void {
    const { spans, instruments } = this;
    return attachLeaseClient(this.clients, client, (o) => {
      if (instruments !== undefined) recordLease(instruments, o, this.groups.of(o.event.key));
      spans?.observe(o);
    });
  }

  /**
   * Starts measuring this process's leadership of `election` (its candidates use `client`).
   * The election's name becomes an attribute value. Returns a function that stops.
   */
  attachElection(client: LeaseClient, election: ElectionLike): () => void {
    requireLeaseClient(client);
    requireElection(election);
    const name = election.name;
    this.leaders.set(name, client.heldLeases().some((l) => l.key === election.key) ? 1 : 0);
    const stop = observeLeadership(client, election.key, (change) => {
      if (this.instruments !== undefined) recordLeadership(this.instruments, name, change);
      this.leaders.set(name, change === 'elected' ? 1 : 0);
    });
    return () => {
      stop();
      this.leaders.delete(name);
    };
  }

  /**
   * Wraps a fence (`SqliteFence`, `PostgresFence`, `RedisFence`): each fenced write gets a
   * span, active while the write runs, and is counted and timed. Returns a fence of the
   * same type; the original keeps working untraced.
   */
  wrapFence<F extends object>(fence: F, options: FenceTelemetryOptions = {}): F {
    const ownerId = options.ownerId;
    if (ownerId !== undefined && typeof ownerId !== 'string')
      throw invalidArgument('ownerId', 'must be a string', ownerId);
    const traced: FenceWatcher | undefined = this.spans?.fenceWatcher(ownerId);
    const { instruments } = this;
    return wrapFence(fence, {
      start: (write) => {
        const startedAt = performance.now();
        const span = traced?.start(write);
        return {
          run: span === undefined ? (w) => w() : span.run,
          end: (outcome) => {
            span?.end(outcome);
            if (instruments === undefined) return;
            const seconds = (performance.now() - startedAt) / 1000;
            recordFencedWrite(instruments, outcome, seconds, this.groups.of(write.scope));
          },
        };
      },
    });
  }

  private *heldByGroup(): Iterable<readonly [string | undefined, number]> {
    const counts = new Map<string | undefined, number>();
    for (const client of this.clients) {
      for (const lease of client.heldLeases()) {
        const group = this.groups.of(lease.key);
        counts.set(group, (counts.get(group) ?? 0) + 1);
      }
    }
    if (!this.groups.enabled && counts.size === 0) counts.set(undefined, 0);
    yield* counts;
  }
}

/** Creates the OpenTelemetry instrumentation; see {@link LeaseTelemetry}. */
export function createLeaseTelemetry(options: LeaseTelemetryOptions = {}): LeaseTelemetry {
  return new LeaseTelemetry(options);
}
