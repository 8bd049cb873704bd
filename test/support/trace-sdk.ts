import { context, propagation, trace, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { AsyncLocalContextManager } from '../metrics/async-context.js';

/**
 * An application's OpenTelemetry setup, registered globally as an SDK does: spans kept in the
 * SDK's in-memory exporter, the context carried across awaits, and the W3C `traceparent`
 * propagator. One per test process (the API's globals are set once).
 */
export function registerTraceSdk() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const manager = new AsyncLocalContextManager();
  context.setGlobalContextManager(manager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  const tracer = provider.getTracer('test-app');
  return {
    exporter,
    /** Runs `fn` inside a span of the test's own (the trace's root), ended after `fn`. */
    async inRootSpan<T>(name: string, fn: (span: Span) => Promise<T>): Promise<T> {
      return tracer.startActiveSpan(name, async (span) => {
        try {
          return await fn(span);
        } finally {
          span.end();
        }
      });
    },
    /** Finished spans named `name` (in the order they ended). */
    named(name: string): ReadableSpan[] {
      return exporter.getFinishedSpans().filter((s) => s.name === name);
    },
    /** Finished spans whose parent is `parent`. */
    childrenOf(parent: ReadableSpan | Span): ReadableSpan[] {
      const id = parent.spanContext().spanId;
      return exporter.getFinishedSpans().filter((s) => s.parentSpanContext?.spanId === id);
    },
    async shutdown(): Promise<void> {
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

/** The `traceparent` a W3C propagator writes for a span (sampled). */
export function traceparentOf(span: ReadableSpan | Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-01`;
}
