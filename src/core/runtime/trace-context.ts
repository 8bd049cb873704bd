import { createRequire } from 'node:module';
import type * as OtelApi from '@opentelemetry/api';

/**
 * The OpenTelemetry API when the application installed it, else `undefined`. Tracing across
 * processes (the `traceparent` header a request carries, the spans of the server and the
 * gateway) follows the application's own OpenTelemetry setup: without the package there is
 * nothing to take part in, so leasehold does not ask for it (unlike `leasehold/otel`, whose
 * whole purpose it is). With the package but no SDK registered, every call below is the API's
 * no-op, and the callers check {@link activeSpanContext} or `isRecording()` before doing work.
 */
export const otelApi: typeof OtelApi | undefined = (() => {
  try {
    // The API keeps its providers, propagator and context manager in one global, so this copy
    // and the one an application imports (ESM or CommonJS) see the same ones.
    return createRequire(import.meta.url)('@opentelemetry/api') as typeof OtelApi;
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
})();

/** The W3C header that carries a span's trace id and span id across a request. */
export const TRACEPARENT = 'traceparent';

/** The active context when it holds a span (a trace to continue), else `undefined`. */
export function activeSpanContext(): OtelApi.Context | undefined {
  if (otelApi === undefined) return undefined;
  const active = otelApi.context.active();
  return otelApi.trace.getSpan(active) === undefined ? undefined : active;
}

/**
 * The propagation headers (`traceparent`, `tracestate`, baggage: whatever the application's
 * registered propagator writes) for `ctx`, or for the active context when it holds a span.
 * `undefined` when there is no trace to continue, so a request without one costs nothing.
 */
export function traceHeaders(ctx?: OtelApi.Context): Record<string, string> | undefined {
  const from = ctx ?? activeSpanContext();
  if (from === undefined || otelApi === undefined) return undefined;
  const carrier: Record<string, string> = {};
  otelApi.propagation.inject(from, carrier);
  return carrier;
}

/**
 * The context a request's headers carry (the caller's span, as the registered propagator reads
 * it), on top of the root context. Header names are lower case, as Node gives them.
 */
export function extractTraceContext(
  headers: Readonly<Record<string, string | string[] | undefined>>,
): OtelApi.Context | undefined {
  if (otelApi === undefined) return undefined;
  return otelApi.propagation.extract(otelApi.ROOT_CONTEXT, headers);
}
