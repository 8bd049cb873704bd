import type { ServerResponse } from 'node:http';
import type { Logger as PinoLogger } from 'pino';
import type { LeaseStore, StoreRequestOptions } from '../core/store.js';
import type { ServerWaitQueues } from './acquire-wait.js';
import type { Authenticator, Principal } from '../http-service/auth.js';
import type { EventHub } from './event-hub.js';
import type { ExpiryTracker } from './expiry-tracker.js';
import type { ServerMetrics } from './metrics.js';

/** What the route modules share: the store and the server's own parts. */
export interface ServerContext {
  readonly store: LeaseStore;
  readonly auth: Authenticator;
  readonly hub: EventHub;
  readonly tracker: ExpiryTracker;
  readonly metrics: ServerMetrics;
  readonly logger: PinoLogger;
  readonly maxWaitMs: number;
  readonly requestTimeoutMs: number;
  readonly pollMs: number;
  /** Fires when the server starts shutting down: waits end, streams close. */
  readonly shutdown: AbortSignal;
  /** Open event streams, ended on shutdown. */
  readonly streams: Set<ServerResponse>;
  /**
   * Options of every store request: the server's request timeout, and a signal that fires on
   * shutdown. One frozen object for all of them; no per-request derived signal: stores bound
   * their own work by `timeoutMs`.
   */
  readonly storeOptions: StoreRequestOptions;
  /**
   * Requests waiting for a key, queued per key: one store subscription per key, and a
   * notification wakes only the first of them (as in the client).
   */
  readonly waiting: ServerWaitQueues;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who made the request; set by the authentication hook on `/v1` routes. */
    principal: Principal | undefined;
  }
  interface FastifyContextConfig {
    /** Whether the route needs a bearer token (when auth is configured). */
    auth?: boolean;
  }
}
