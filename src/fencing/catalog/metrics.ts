import { Counter, Registry } from 'prom-client';
import type { PublishResult } from './results.js';

/**
 * The catalog's Prometheus metrics (bounded labels: no names or handles). Registered once per
 * registry; a second catalog on the same registry shares the counters.
 */
export class CatalogMetrics {
  readonly registry: Registry;
  /** Publishes by result (`applied`, `duplicate`, `stale_fence`, `version_conflict`, `not_staged`). */
  readonly publishes: Counter<'result'>;
  /** Objects deleted by the collector, by why (`unreferenced`, `orphan`). */
  readonly gcDeletions: Counter<'reason'>;
  readonly bytesStaged: Counter;
  readonly bytesCollected: Counter;

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    const counter = <L extends string>(
      name: string,
      help: string,
      labelNames: L[] = [],
    ): Counter<L> =>
      (registry.getSingleMetric(name) as Counter<L> | undefined) ??
      new Counter<L>({ name, help, labelNames, registers: [registry] });
    this.publishes = counter('leasehold_catalog_publishes_total', 'Catalog publishes by result.', [
      'result',
    ]);
    this.gcDeletions = counter(
      'leasehold_catalog_gc_deletions_total',
      'Objects deleted by catalog garbage collection.',
      ['reason'],
    );
    this.bytesStaged = counter(
      'leasehold_catalog_staged_bytes_total',
      'Bytes staged into the catalog.',
    );
    this.bytesCollected = counter(
      'leasehold_catalog_collected_bytes_total',
      'Bytes deleted by catalog garbage collection.',
    );
  }

  countPublish(result: PublishResult): void {
    this.publishes.inc({ result: result.status });
  }
}
