import { LeaseholdError } from '../../core/errors.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
} from '../../core/store.js';
import type { HolderInfo, LeaseState, StoreCapabilities } from '../../core/types.js';
import { parseToken } from '../../core/validate.js';
import { RequestBatcher, type BatchOpName, type Retry } from './batch.js';
import { NodeHttpTransport, type RequestTransport, type StreamTransport } from './client.js';
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
import { optionsFromInfo, resolveHttpStoreOptions, type HttpLeaseStoreOptions } from './options.js';
import { PooledHttpTransport } from './pooled-transport.js';

export type { HttpLeaseStoreOptions } from './options.js';

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
export class HttpLeaseStore implements LeaseStore {
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
    this.capabilities = o.capabilities;
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
    return new HttpLeaseStore(optionsFromInfo(options, info.body));
  }

  async tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    const a = await this.call(
      'acquire',
      {
        key: request.key,
        ttl: request.ttlMs,
        ownerId: request.ownerId,
        leaseId: request.leaseId,
        ...(request.value === undefined ? {} : { value: request.value }),
        ...(request.tokenBlock === undefined || request.tokenBlock <= 1
          ? {}
          : { tokenBlock: request.tokenBlock }),
      },
      'idempotent',
      options,
    );
    if (a.status === 200) {
      const expires = a.body['expiresAtWallMs'];
      return {
        status: 'acquired',
        token: this.token(a.body['token']),
        ...(typeof expires === 'number' ? { expiresAtWallMs: expires } : {}),
      };
    }
    if (a.status === 409 && answerCode(a) === 'busy') {
      const retry = a.body['retryAfterMs'];
      return {
        status: 'busy',
        holder: this.holder(a.body['holder']),
        retryAfterMs: typeof retry === 'number' && retry >= 0 ? retry : 0,
      };
    }
    throw unexpectedAnswer(a, 'acquire');
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    const a = await this.call(
      'renew',
      { key: lease.key, leaseId: lease.leaseId, token: lease.token.toString(), ttl: lease.ttlMs },
      'idempotent',
      options,
    );
    if (a.status === 200) {
      const expires = a.body['expiresAtWallMs'];
      return {
        status: 'renewed',
        ...(typeof expires === 'number' ? { expiresAtWallMs: expires } : {}),
      };
    }
    // Both mean: this lease is not live at the store, and never will be again.
    if (a.status === 410 || (a.status === 409 && answerCode(a) === 'not_owner'))
      return { status: 'lost' };
    throw unexpectedAnswer(a, 'renew');
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
    return this.state(a.body);
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
    return (a.body['leases'] as unknown[]).map((s) => this.state(s as Record<string, unknown>));
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
    body: Record<string, unknown> | undefined,
    retry: Retry,
    options: Pick<StoreRequestOptions, 'timeoutMs'>,
  ): Promise<Answer> {
    this.assertOpen();
    const deadline = performance.now() + options.timeoutMs;
    const headers = body === undefined ? this.headers : this.jsonHeaders;
    const text = body === undefined ? undefined : JSON.stringify(body);
    let lastError: unknown;
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      const left = Math.ceil(deadline - performance.now());
      if (left <= 0) break;
      let res: { status: number; text: string };
      try {
        res = await this.calls.request(method, path, headers, text, left);
      } catch (err) {
        lastError = err;
        if (this.closing.signal.aborted) throw storeClosedError();
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

  private token(value: unknown): bigint {
    try {
      return parseToken(value, 'token');
    } catch (err) {
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `leasehold server sent an invalid token: ${String(err)}`,
        { cause: err },
      );
    }
  }

  private holder(raw: unknown): HolderInfo {
    const h = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
    return {
      ownerId: typeof h['ownerId'] === 'string' ? h['ownerId'] : '',
      token: this.token(h['token']),
      remainingMs: typeof h['remainingMs'] === 'number' ? h['remainingMs'] : 0,
      leaseIdPrefix: typeof h['leaseIdPrefix'] === 'string' ? h['leaseIdPrefix'] : '',
      value: typeof h['value'] === 'string' ? h['value'] : undefined,
    };
  }

  private state(raw: Record<string, unknown>): LeaseState {
    const key = raw['key'];
    if (typeof key !== 'string')
      throw new LeaseholdError('ERR_PROTOCOL', 'leasehold server sent a state without key');
    const last = raw['lastToken'];
    return {
      key,
      lastToken: last === '0' ? 0n : this.token(last),
      holder:
        raw['holder'] === null || raw['holder'] === undefined
          ? undefined
          : this.holder(raw['holder']),
    };
  }
}
