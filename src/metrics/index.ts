/**
 * `leasehold/metrics`: Prometheus metrics (prom-client) for the client side of leasehold, fed
 * by lease clients' events and by wrapped fences. See docs/metrics.md.
 */
export { LeaseMetrics, createLeaseMetrics } from './lease-metrics.js';
export type { LeaseMetricsOptions, ElectionLike } from './lease-metrics.js';
export { KEY_GROUP_DEFAULTS, OTHER_KEY_GROUP } from './key-groups.js';
export type { KeyGroupOptions } from './key-groups.js';
export { LEASE_METRICS } from './metric-names.js';
