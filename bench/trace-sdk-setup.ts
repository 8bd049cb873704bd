// Loaded with `node --import` into the lease server of bench/http-ab.ts's "traced" subject: an
// application's OpenTelemetry setup (context manager, W3C propagator, a tracer provider that
// records every span and hands them in batches to an exporter), so the server's request and
// store spans are made and exported as they would be in production. The exporter drops them:
// what is measured is the server's side, not a collector's.
import { context, propagation, trace } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { AsyncLocalContextManager } from '../test/metrics/async-context.js';

let exported = 0;
const dropping: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    exported += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: () => Promise.resolve(),
};
context.setGlobalContextManager(new AsyncLocalContextManager());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }),
);
process.once('SIGTERM', () => {
  console.error(`trace-sdk-setup: ${exported} spans exported`);
  process.exit(0);
});
