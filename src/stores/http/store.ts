import { LeaseholdError } from '../../core/errors.js';
import type {
  BatchRenewingLeaseStore,
  LeaseStore,
  QueueingLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreQueuedOptions,
  StoreQueuedResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewRequest,
  StoreRenewManyResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
} from '../../core/store.js';
import type { LeaseState, StoreCapabilities } from '../../core/types.js';
import { RequestBatcher, type BatchLimits, type BatchOpName, type Retry } from './batch.js';
import { acquireBody, acquireResult, stateOf } from './answers.js';
import {
  NodeHttpTransport,
  type RequestHooks,
  type RequestTransport,
  type StreamTransport,
} from './client.js';
import {
  answerCode,
  connectionBroken,
  neverSent,
  storeClosedError,
  unexpectedAnswer,
  unreachable,
  type Answer,
} from './errors.js';
import { watchKey } from './notify.js';
import {
  DEFAULTS,
  optionsFromInfo,
  resolveHttpStoreOptions,
  type HttpLeaseStoreOptions,
} from './options.js';
import { inTurn } from './arrival-order.js';
import { PooledHttpTransport } from './pooled-transport.js';
import { renewBody, renewInRequests, renewResultOf } from './renew-many.js';

export type { HttpLeaseStoreOptions } from './options.js';

/** Asks the server for a `102 Processing` once a waiting acquire is parked. */
const PARKED = 'leasehold-parked';

/** What one call may add to a request: its headers, hooks, and a note of each resend. */
interface RequestExtras extends RequestHooks {
  readonly headers?: Readonly<Record<string, string>>;
  readonly resent?: () => void;
}

const OP_PATHS: Readonly<Record<BatchOpName, string>> = Object.freeze({
  acquire: '/v1/acquire',
  renew: '/v1/renew',
  release: '/v1/release',
});

/**
 * A {@link LeaseStore} that talks to a leasehold server (`leasehold serve`) over HTTP, so the
 * same client library works remotely. Expiry is decided by the server's store, as with a direct
 * store. Waiting acquisitions are woken by the server's event stream for the key.
 *
 * - Retries: acquire carries the client's lease id and renew is conditional, so both are
 *   retried on a broken connection; release only when the request was certainly not sent.
 * - A server that cannot be reached, times out or answers 5xx throws `ERR_UNAVAILABLE`; the
 *   client turns that into `unavailable`, never `busy`.
 * - 400, 401 and 403 throw `ERR_INVALID_ARGUMENT` (a wrong request or bearer token will not get
 *   better by retrying); the `cause` is an {@link HttpApiError} with the status and code.
 *
 * @example
 * const store = await HttpLeaseStore.connect({ url: 'http://127.0.0.1:7400', apiToken });
 * const client = new LeaseClient({ store });
 */
export class HttpLeaseStore implements LeaseStore, QueueingLeaseStore, BatchRenewingLeaseStore {
  readonly kind = 'http';
  readonly capabilities: StoreCapabilities;
  readonly url: string;
  private readonly headers: Readonly<Record<string, string>>;
  private readonly jsonHeaders: Readonly<Record<string, string>>;
  /** Request/answer calls. */
  private readonly calls: RequestTransport;
  /** Event streams (watch). */
  private readonly streams: StreamTransport;
  private readonly attempts: number;
  private readonly closing = new AbortController();
  /** Batches lease operations; undefined when batching is off. */
  private readonly batcher: RequestBatcher | undefined;
  /** The batch limits (undefined when batching is off: then no `renewMany` either). */
  private readonly batchLimits: BatchLimits | undefined;
  /** Per key, the last queued wait sent: resolves once the server has parked or answered it. */
  private readonly arrivals = new Map<string, Promise<void>>();
  /** The longest `wait` the server accepts (`connect` reads it from `/v1/info`). */
  private maxWaitMs: number = DEFAULTS.serverMaxWaitMs;

  constructor(options: HttpLeaseStoreOptions) {
    const o = resolveHttpStoreOptions(options);
    this.url = o.url;
    this.headers = o.headers;
    this.jsonHeaders = { ...o.headers, 'content-type': 'application/json' };
    this.calls = new PooledHttpTransport(o.base, o.tls);
    this.streams = new NodeHttpTransport(o.base, o.tls);
    this.attempts = o.attempts;
    if (o.batch !== undefined) {
      this.batcher = new RequestBatcher(
        {
          attempts: o.attempts,
          sendBatch: (text, timeoutMs) =>
            this.calls.request('POST', '/v1/batch', this.jsonHeaders, text, timeoutMs),
          sendOne: (op, body, retry, timeoutMs) =>
            this.request('POST', OP_PATHS[op], body, retry, { timeoutMs }),
          closed: () => this.closing.signal.aborted,
          unreachable: (cause) => unreachable(this.url, cause),
        },
        o.batch,
      );
    }
    this.batchLimits = o.batch;
    if (o.batch === undefined) {
      // No batches: each renewal is its own request, so the client renews one by one.
      Object.defineProperty(this, 'renewMany', { value: undefined });
    }
    this.capabilities = o.capabilities;
    if (!o.waitInServerQueue) {
      // Not a queueing store then: the client waits with its own loop.
      Object.defineProperty(this, 'acquireQueued', { value: undefined });
    }
  }

  /**
   * Connects to a server: asks `/v1/info` for the capabilities of the store behind it, and
   * returns a store that reports them. Throws `ERR_UNAVAILABLE` when the server cannot be reached.
   */
  static async connect(options: HttpLeaseStoreOptions): Promise<HttpLeaseStore> {
    const probe = new HttpLeaseStore(options);
    let info: Answer;
    try {
      info = await probe.request('GET', '/v1/info', undefined, 'idempotent', { timeoutMs: 5000 });
    } finally {
      await probe.close();
    }
    if (info.status !== 200) throw unexpectedAnswer(info, 'info');
    const store = new HttpLeaseStore(optionsFromInfo(options, info.body));
    const limits = info.body['limits'] as { maxWaitMs?: unknown } | undefined;
    if (typeof limits?.maxWaitMs === 'number' && limits.maxWaitMs >= 1) {
      store.maxWaitMs = Math.floor(limits.maxWaitMs);
    }
    return store;
  }

  async tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    return acquireResult(await this.call('acquire', acquireBody(request), 'idempotent', options));
  }

  /**
   * Waits in the server's queue for the key: `POST /v1/acquire` with `wait`. The server parks
   * the request with the others waiting for the key through it, grants them in arrival order
   * and wakes only the head on a release (one re-check per release however many wait). A wait
   * longer than the server's `maxWaitMs` is asked as several. Aborting closes the request's
   * connection, which ends the wait at the server (and releases a grant made just then).
   *
   * `validFrom` is the reading of `options.now()` before sending, plus the server's
   * `grantSentAfterMs` less 1% (the server's clock may run fast by up to that) — from the
   * first request only: a resent request may return a grant the first one made earlier.
   */
  async acquireQueued(
    request: StoreAcquireRequest,
    options: StoreQueuedOptions,
  ): Promise<StoreQueuedResult> {
    this.assertOpen();
    const until = options.now() + options.timeoutMs;
    // The waits of this store for one key reach the server in call order: each is sent once
    // the one before is parked there (its 102) or answered. The requests go over different
    // connections, which the server would otherwise read in any order.
    const previous = this.arrivals.get(request.key);
    let arrived!: () => void;
    const mine = new Promise<void>((resolve) => (arrived = resolve));
    this.arrivals.set(request.key, mine);
    const onInterim = (status: number): void => {
      if (status !== 102) return;
      arrived();
      options.onParked?.();
    };
    const headers = { ...this.jsonHeaders, prefer: PARKED };
    try {
      if (previous !== undefined) await inTurn(previous, options.signal);
      return await this.queued(request, options, until, headers, onInterim);
    } finally {
      arrived();
      if (this.arrivals.get(request.key) === mine) this.arrivals.delete(request.key);
    }
  }

  private async queued(
    request: StoreAcquireRequest,
    options: StoreQueuedOptions,
    until: number,
    headers: Readonly<Record<string, string>>,
    onInterim: (status: number) => void,
  ): Promise<StoreQueuedResult> {
    for (;;) {
      const waitMs = Math.max(0, Math.min(this.maxWaitMs, Math.floor(until - options.now())));
      let resent = false;
      const sentAt = options.now();
      const a = await this.request(
        'POST',
        '/v1/acquire',
        { ...acquireBody(request), wait: waitMs },
        'idempotent',
        { timeoutMs: waitMs + options.requestTimeoutMs },
        { signal: options.signal, onInterim, headers, resent: () => (resent = true) },
      );
      const result = acquireResult(a);
      if (result.status === 'acquired') {
        const after = a.body['grantSentAfterMs'];
        const offset = !resent && typeof after === 'number' && after > 0 ? after * 0.99 : 0;
        return { ...result, validFrom: Math.min(sentAt + offset, options.now()) };
      }
      if (options.now() >= until || waitMs === 0) return result;
    }
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    return renewResultOf(await this.call('renew', renewBody(lease), 'idempotent', options));
  }

  /**
   * {@link BatchRenewingLeaseStore}: the leases in one `POST /v1/batch` of renewals (more only
   * beyond the server's `batchMaxRenewals`), which the server sends to its store as one
   * `renewMany` call; each lease answered on its own (see renew-many.ts).
   */
  async renewMany(
    leases: readonly StoreRenewRequest[],
    options: StoreRequestOptions,
  ): Promise<readonly StoreRenewManyResult[]> {
    if (leases.length === 0) return [];
    this.assertOpen();
    return renewInRequests(
      {
        sendBatch: (text, o) => this.request('POST', '/v1/batch', text, 'idempotent', o),
        renewOne: (lease, o) => this.renew(lease, o),
      },
      leases,
      this.batchLimits!,
      options,
    );
  }

  async release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    const a = await this.call(
      'release',
      { key: lease.key, leaseId: lease.leaseId, token: lease.token.toString() },
      'not_sent_only',
      options,
    );
    if (a.status === 200) return { status: 'released' };
    if (a.status === 409 && answerCode(a) === 'not_owner') return { status: 'not_owner' };
    throw unexpectedAnswer(a, 'release');
  }

  async inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    const a = await this.request(
      'GET',
      `/v1/leases/${encodeURIComponent(key)}`,
      undefined,
      'idempotent',
      options,
    );
    if (a.status !== 200) throw unexpectedAnswer(a, 'inspect');
    return stateOf(a.body);
  }

  async list(prefix: string, limit: number, options: StoreRequestOptions): Promise<LeaseState[]> {
    const q = new URLSearchParams({ prefix, limit: String(limit) });
    const a = await this.request(
      'GET',
      `/v1/leases?${q.toString()}`,
      undefined,
      'idempotent',
      options,
    );
    if (a.status !== 200 || !Array.isArray(a.body['leases'])) throw unexpectedAnswer(a, 'list');
    return (a.body['leases'] as unknown[]).map((s) => stateOf(s as Record<string, unknown>));
  }

  /**
   * Subscribes to the server's event stream for `key` (see {@link watchKey}): releases,
   * expiries and the store's own notifications call `onChange()`, grants
   * `onChange('granted')`; a dropped stream wakes the waiter and is re-opened.
   */
  watch(key: string, onChange: (change?: WatchChange) => void): Promise<Unwatch> {
    this.assertOpen();
    return watchKey(
      { url: this.url, streams: this.streams, headers: this.headers, closing: this.closing.signal },
      key,
      onChange,
    );
  }

  close(): Promise<void> {
    this.batcher?.failQueued(storeClosedError());
    this.calls.close();
    this.streams.close();
    this.closing.abort(storeClosedError());
    return Promise.resolve();
  }

  private assertOpen(): void {
    if (this.closing.signal.aborted) throw storeClosedError();
  }

  /** A lease operation: batched with the others of this turn, or its own request. */
  private call(
    op: BatchOpName,
    body: Record<string, unknown>,
    retry: Retry,
    options: Pick<StoreRequestOptions, 'timeoutMs'>,
  ): Promise<Answer> {
    if (this.batcher?.active === true) {
      this.assertOpen();
      return this.batcher.submit(op, body, retry, options.timeoutMs);
    }
    return this.request('POST', OP_PATHS[op], body, retry, options);
  }

  /**
   * One API call, retried while `retry` allows it, all within `options.timeoutMs`. The
   * caller's `options.signal` is not read: reading it makes the client build an AbortController
   * per request, and the call is bounded by its timeout anyway (the client stops waiting for it
   * at once when aborted, and releases a grant that arrives late).
   */
  private async request(
    method: 'GET' | 'POST',
    path: string,
    body: Record<string, unknown> | string | undefined,
    retry: Retry,
    options: Pick<StoreRequestOptions, 'timeoutMs'>,
    extra?: RequestExtras,
  ): Promise<Answer> {
    this.assertOpen();
    const deadline = performance.now() + options.timeoutMs;
    const headers = extra?.headers ?? (body === undefined ? this.headers : this.jsonHeaders);
    // A string is the body's JSON text already (a batch of renewals, see renew-many.ts).
    const text = body === undefined || typeof body === 'string' ? body : JSON.stringify(body);
    let lastError: unknown;
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      const left = Math.ceil(deadline - performance.now());
      if (left <= 0) break;
      let res: { status: number; text: string };
      if (attempt > 1) extra?.resent?.();
      try {
        res = await this.calls.request(method, path, headers, text, left, extra);
      } catch (err) {
        lastError = err;
        if (this.closing.signal.aborted) throw storeClosedError();
        if (extra?.signal?.aborted === true) {
          throw new LeaseholdError('ERR_ABORTED', 'the wait was aborted', { cause: err });
        }
        const safe = retry === 'idempotent' ? connectionBroken(err) : neverSent(err);
        if (safe && attempt < this.attempts) continue;
        break;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(res.text);
      } catch (err) {
        if (res.status >= 500) return { status: res.status, body: {} };
        throw new LeaseholdError(
          'ERR_UNAVAILABLE',
          `${this.url} answered ${res.status} without JSON`,
          { cause: err },
        );
      }
      const obj =
        typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
      return { status: res.status, body: obj };
    }
    throw unreachable(this.url, lastError ?? new Error(`no answer within ${options.timeoutMs}ms`));
  }
}
