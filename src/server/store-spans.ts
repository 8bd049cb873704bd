import type { Attributes } from '@opentelemetry/api';
import type { LeaseStore } from '../core/store.js';
import { activeSpanContext, otelApi } from '../core/runtime/trace-context.js';

/**
 * The store calls the server makes, by method, with the operation name their spans carry (the
 * same names as the server's store metrics).
 */
const OPERATIONS: Readonly<Record<string, string>> = Object.freeze({
  tryAcquire: 'acquire',
  acquireQueued: 'acquire_queued',
  renew: 'renew',
  renewMany: 'renew_many',
  release: 'release',
  releaseAndAcquire: 'release_and_acquire',
  inspect: 'inspect',
  list: 'list',
});

/** `db.system.name` of each store kind: OpenTelemetry's well-known names where there is one. */
const DB_SYSTEMS: Readonly<Record<string, string>> = Object.freeze({
  postgres: 'postgresql',
  redis: 'redis',
  sqlite: 'sqlite',
  etcd: 'etcd',
});

/** The semantic-convention attribute names of a database client span. */
export const DB_ATTRIBUTES = Object.freeze({
  system: 'db.system.name',
  operation: 'db.operation.name',
});

/**
 * `store` with a client span around each of the calls in {@link OPERATIONS} that is made
 * while a span is active (a request's server span): `db.system.name` is the store's database,
 * `db.operation.name` the lease operation. Calls made outside any trace (the expiry tracker's
 * checks, the readiness probe) go straight to the store. Without `@opentelemetry/api`
 * installed this is `store` itself.
 *
 * A proxy rather than a wrapper class: which optional methods a store has (`renewMany`,
 * `acquireQueued`, `releaseAndAcquire`) is its capability, and the proxy keeps exactly those.
 */
export function storeWithSpans(store: LeaseStore, scope: string, version: string): LeaseStore {
  const api = otelApi;
  if (api === undefined) return store;
  const tracer = api.trace.getTracer(scope, version);
  const system = DB_SYSTEMS[store.kind] ?? store.kind;
  const methods = new Map<PropertyKey, unknown>();
  for (const [method, operation] of Object.entries(OPERATIONS)) {
    const fn = (store as unknown as Record<string, unknown>)[method];
    if (typeof fn !== 'function') continue;
    const call = fn as (...args: unknown[]) => Promise<unknown>;
    const attributes: Attributes = {
      [DB_ATTRIBUTES.system]: system,
      [DB_ATTRIBUTES.operation]: operation,
    };
    const name = `${operation} ${system}`;
    methods.set(method, (...args: unknown[]): Promise<unknown> => {
      const parent = activeSpanContext();
      if (parent === undefined) return call.apply(store, args);
      const span = tracer.startSpan(name, { kind: api.SpanKind.CLIENT, attributes }, parent);
      return api.context
        .with(api.trace.setSpan(parent, span), () => call.apply(store, args))
        .then(
          (value) => {
            span.end();
            return value;
          },
          (err: unknown) => {
            if (err instanceof Error) span.recordException(err);
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(err) });
            span.end();
            throw err;
          },
        );
    });
  }
  // The proxy's target is a stand-in, not the store: a store may define a method as a
  // read-only own property (its presence is a capability), and a proxy of the store itself
  // could then not answer that property with a traced function.
  const standIn = Object.create(null) as LeaseStore;
  return new Proxy(standIn, {
    get(_target, prop) {
      const traced = methods.get(prop);
      if (traced !== undefined) return traced;
      const value: unknown = Reflect.get(store, prop, store);
      if (typeof value !== 'function') return value;
      // Bound once: a store's methods may use private fields, which `this` must be the store for.
      let bound = methods.get(prop);
      if (bound === undefined) {
        bound = (value as (...args: unknown[]) => unknown).bind(store);
        methods.set(prop, bound);
      }
      return bound;
    },
    has: (_target, prop) => prop in store,
    set: (_target, prop, value) => Reflect.set(store, prop, value, store),
    getPrototypeOf: () => Object.getPrototypeOf(store) as object | null,
  });
}
