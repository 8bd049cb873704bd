/**
 * `leasehold/otel`: OpenTelemetry spans and metrics for the client side of leasehold, through
 * `@opentelemetry/api` (an optional peer dependency: install it to use this subpath; the rest
 * of leasehold never loads it). See docs/metrics.md.
 */
export { LeaseTelemetry, createLeaseTelemetry, INSTRUMENTATION_SCOPE } from './lease-telemetry.js';
export type { LeaseTelemetryOptions, FenceTelemetryOptions } from './lease-telemetry.js';
export { SPAN_NAMES, SPAN_ATTRIBUTES } from './lease-spans.js';
export { LEASE_METRICS } from '../metrics/metric-names.js';
