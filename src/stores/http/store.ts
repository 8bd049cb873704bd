import type { IncomingMessage } from 'node:http';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
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
import {
  DEFAULT_BATCH_LIMITS,
  RequestBatcher,
  type Answer,
  type BatchLimits,
  type BatchOpName,
  type Retry,
} from './batcher.js';
import { connectionBroken, HttpApiError, neverSent, storeClosedError } from './client.js';
import { linkSignals } from '../../core/runtime/signals.js';
import { readSse, type SseFrame } from './sse-reader.js';
import { PooledHttpTransport } from './pooled-transport.js';
import { parseServerUrl } from './server-url.js';
import { NodeHttpTransport } from './transport.js';

/** Options for {@link HttpLeaseStore}. */
export interface HttpLeaseStoreOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:7400`. */
  readonly url: string;
  /** Bearer token, when the server requires one. Defaults to none. */
  readonly apiToken?: string;
  /**
   * What the store behind the server can do. {@link HttpLeaseStore.connect} asks the server;
   * the constructor defaults to conservative values (`timeAuthority: 'store'`,
   * `tokenDurability: 'best_effort'`, 100 ms minimum TTL, no `tokenBlocks`). Claim
   * `tokenBlocks` only for a server whose `/v1/info` says so: another server refuses an acquire
   * with a block (400, `ERR_INVALID_ARGUMENT`).
   */
  readonly capabilities?: Partial<StoreCapabilities>;
  /** Extra CA certificates (PEM) to trust for an `https:` server. Defaults to the system's. */
  readonly ca?: string | Buffer;
  /** Attempts per request when the connection fails in a way that is safe to retry. Defaults to 3. */
  readonly attempts?: number;
  /**
   * Send the acquire, renew and release requests of one event-loop turn as one
   * `POST /v1/batch` (see {@link RequestBatcher}). Defaults to true; `connect` sizes batches by
   * the server's limits, and a server without the route turns it off by itself.
   */
  readonly batch?: boolean | BatchLimits;
}

/**
 * Events after which the key may be free. `renewed` never frees it; `changed` without a token
 * (the store's own notification, relayed when the key is free) may mean anything, so it wakes
 * too. `acquired`, and `changed` with a token (a grant the server learnt of from its store),
 * tell of a grant: the watch reports them as `'granted'`.
 */
const FREEING_EVENTS: ReadonlySet<string> = new Set(['released', 'expired', 'lost']);

/** First reconnect delay of a dropped event stream until the server sends `retry:`. */
const DEFAULT_RETRY_MS = 100;
/** Repeated reconnect failures back off up to this (or the server's `retry:`, if longer). */
const MAX_RETRY_MS = 2000;

const DEFAULT_CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'store',
  tokenDurability: 'best_effort',
  watch: 'push',
  sharedAcrossProcesses: true,
  minTtlMs: 100,
  ttlGranularityMs: 1,
  tokenBlocks: false,
});

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
  private readonly headers: Record<string, string>;
  private readonly jsonHeaders: Record<string, string>;
  /** Request/answer calls. */
  private readonly calls: PooledHttpTransport;
  /** Event streams (watch). */
  private readonly streams: NodeHttpTransport;
  private readonly attempts: number;
  private readonly closing = new AbortController();
  /** Batches lease operations; undefined when batching is off. */
  private readonly batcher: RequestBatcher | undefined;

  constructor(options: HttpLeaseStoreOptions) {
    const base = parseServerUrl(options);
    this.url = base.href.replace(/\/+$/, '');
    this.headers = { accept: 'application/json' };
    if (options.apiToken !== undefined) {
      if (typeof options.apiToken !== 'string' || !/^[\x21-\x7e]{1,512}$/.test(options.apiToken)) {
        throw invalidArgument('apiToken', 'must be printable ASCII without spaces', '(hidden)');
      }
      this.headers['authorization'] = `Bearer ${options.apiToken}`;
    }
    this.jsonHeaders = { ...this.headers, 'content-type': 'application/json' };
    const tls = options.ca === undefined ? {} : { ca: options.ca };
    this.calls = new PooledHttpTransport(base, tls);
    this.streams = new NodeHttpTransport(base, tls);
    const attempts = options.attempts ?? 3;
    if (!Number.isInteger(attempts) || attempts < 1 || attempts > 10) {
      throw invalidArgument('attempts', 'must be an integer from 1 to 10', attempts);
    }
    this.attempts = attempts;
    const batch = options.batch ?? true;
    if (batch !== false) {
      const limits = batch === true ? DEFAULT_BATCH_LIMITS : batch;
      if (
        !Number.isInteger(limits.maxOps) ||
        limits.maxOps < 1 ||
        !Number.isInteger(limits.maxBytes) ||
        limits.maxBytes < 1024
      ) {
        throw invalidArgument('batch', 'maxOps must be ≥ 1 and maxBytes ≥ 1024', batch);
      }
      this.batcher = new RequestBatcher(
        {
          attempts,
          sendBatch: (text, timeoutMs) =>
            this.calls.request('POST', '/v1/batch', this.jsonHeaders, text, timeoutMs),
          sendOne: (op, body, retry, timeoutMs) =>
            this.request('POST', OP_PATHS[op], body, retry, { timeoutMs }),
          closed: () => this.closing.signal.aborted,
          unreachable: (cause) => this.unreachable(cause),
        },
        limits,
      );
    }
    this.capabilities = Object.freeze({
      ...DEFAULT_CAPABILITIES,
      ...options.capabilities,
      watch: 'push',
    });
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
    if (info.status !== 200) throw probe.unexpected(info, 'info');
    const store = info.body['store'] as { capabilities?: Partial<StoreCapabilities> } | undefined;
    const caps = store?.capabilities ?? {};
    return new HttpLeaseStore({
      ...options,
      batch: batchLimits(options.batch, info.body['limits']),
      capabilities: {
        timeAuthority: caps.timeAuthority ?? DEFAULT_CAPABILITIES.timeAuthority,
        tokenDurability: caps.tokenDurability ?? DEFAULT_CAPABILITIES.tokenDurability,
        minTtlMs: Math.max(DEFAULT_CAPABILITIES.minTtlMs, caps.minTtlMs ?? 0),
        ttlGranularityMs: caps.ttlGranularityMs ?? 1,
        // Only an explicit true: a client that sent blocks to a server whose store grants
        // single tokens would hand out tokens that later grants receive again.
        tokenBlocks: caps.tokenBlocks === true,
      },
    });
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
    if (a.status === 409 && this.code(a) === 'busy') {
      const retry = a.body['retryAfterMs'];
      return {
        status: 'busy',
        holder: this.holder(a.body['holder']),
        retryAfterMs: typeof retry === 'number' && retry >= 0 ? retry : 0,
      };
    }
    throw this.unexpected(a, 'acquire');
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
    if (a.status === 410 || (a.status === 409 && this.code(a) === 'not_owner'))
      return { status: 'lost' };
    throw this.unexpected(a, 'renew');
  }

  async release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    const a = await this.call(
      'release',
      { key: lease.key, leaseId: lease.leaseId, token: lease.token.toString() },
      'not_sent_only',
      options,
    );
    if (a.status === 200) return { status: 'released' };
    if (a.status === 409 && this.code(a) === 'not_owner') return { status: 'not_owner' };
    throw this.unexpected(a, 'release');
  }

  async inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    const a = await this.request(
      'GET',
      `/v1/leases/${encodeURIComponent(key)}`,
      undefined,
      'idempotent',
      options,
    );
    if (a.status !== 200) throw this.unexpected(a, 'inspect');
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
    if (a.status !== 200 || !Array.isArray(a.body['leases'])) throw this.unexpected(a, 'list');
    return (a.body['leases'] as unknown[]).map((s) => this.state(s as Record<string, unknown>));
  }

  /**
   * Subscribes to the server's event stream for `key`; resolves once the server says the
   * subscription is live. Releases, expiries and the store's own notifications call
   * `onChange()`, grants `onChange('granted')`. If the stream drops, `onChange` is called (a
   * spurious wake-up is allowed) and the stream is re-opened until unwatched, after the
   * server's `retry:` time (doubling on repeated failures), with `Last-Event-ID` set to the
   * last event id seen.
   */
  async watch(key: string, onChange: (change?: WatchChange) => void): Promise<Unwatch> {
    this.assertOpen();
    const stop = new AbortController();
    // Lives as long as the watch; detached when it stops.
    const { signal, dispose } = linkSignals([stop.signal, this.closing.signal]);
    const path = `/v1/events?${new URLSearchParams({ key }).toString()}`;
    let lastEventId: string | undefined;
    let retryMs = DEFAULT_RETRY_MS;
    const open = async (): Promise<AsyncGenerator<SseFrame>> => {
      let res: IncomingMessage;
      const headers: Record<string, string> = { ...this.headers, accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      try {
        res = await this.streams.stream(path, headers, signal);
      } catch (err) {
        throw new LeaseholdError('ERR_UNAVAILABLE', `cannot reach ${this.url}: ${describe(err)}`, {
          cause: err,
        });
      }
      if (res.statusCode !== 200) {
        let text = '';
        for await (const c of res) text += String(c);
        throw this.unexpected({ status: res.statusCode ?? 0, body: parseObject(text) }, 'watch');
      }
      const frames = readSse(res, { onRetry: (ms) => (retryMs = ms) });
      for (;;) {
        const first = await frames.next();
        if (first.done === true)
          throw new LeaseholdError('ERR_UNAVAILABLE', 'event stream ended before it was ready');
        if (first.value.id !== undefined) lastEventId = first.value.id;
        if (first.value.event === 'ready') return frames;
      }
    };
    // A release usually arrives as `released` plus the store's own `changed` in one chunk:
    // wake the waiter once for both, or every waiter on a hot key re-checks twice. A grant in
    // the same turn as a release is reported as the release (the key may be free again).
    let pending: 'freed' | 'granted' | undefined;
    const wake = (kind: 'freed' | 'granted'): void => {
      const first = pending === undefined;
      if (kind === 'freed' || first) pending = kind;
      if (!first) return;
      setImmediate(() => {
        const k = pending;
        pending = undefined;
        if (signal.aborted) return;
        if (k === 'granted') onChange('granted');
        else onChange();
      });
    };
    const pump = async (frames: AsyncGenerator<SseFrame>): Promise<void> => {
      for (let attempt = 0; !signal.aborted; attempt++) {
        try {
          for await (const f of frames) {
            attempt = 0;
            if (f.id !== undefined) lastEventId = f.id;
            const kind = changeOf(f);
            if (kind !== undefined) wake(kind);
          }
        } catch {
          // dropped: fall through to reconnect
        }
        if (signal.aborted) return;
        // Events sent while the stream was down are not replayed: wake the waiter to re-check.
        onChange();
        const delay = Math.min(Math.max(MAX_RETRY_MS, retryMs), retryMs * 2 ** attempt);
        await new Promise((r) => setTimeout(r, delay).unref());
        if (signal.aborted) return;
        try {
          frames = await open();
        } catch {
          frames = (async function* () {})();
        }
      }
    };
    let frames: AsyncGenerator<SseFrame>;
    try {
      frames = await open();
    } catch (err) {
      stop.abort();
      dispose();
      throw err;
    }
    void pump(frames);
    return () => {
      stop.abort();
      dispose();
    };
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
    throw this.unreachable(lastError ?? new Error(`no answer within ${options.timeoutMs}ms`));
  }

  /** The error of a call that could not be sent or was not answered. */
  private unreachable(cause: unknown): LeaseholdError {
    return new LeaseholdError(
      'ERR_UNAVAILABLE',
      `cannot reach leasehold server ${this.url}: ${describe(cause)}`,
      { cause },
    );
  }

  private code(a: Answer): string | undefined {
    const e = a.body['error'] as { code?: unknown } | undefined;
    return typeof e?.code === 'string' ? e.code : undefined;
  }

  private unexpected(a: Answer, op: string): LeaseholdError {
    const e = a.body['error'] as { code?: unknown; message?: unknown } | undefined;
    const code = typeof e?.code === 'string' ? e.code : `http_${a.status}`;
    const message = typeof e?.message === 'string' ? e.message : `HTTP ${a.status}`;
    const cause = new HttpApiError(a.status, code, message);
    if (a.status >= 500 || a.status === 408 || a.status === 429) {
      return new LeaseholdError('ERR_UNAVAILABLE', `leasehold server: ${op}: ${code}: ${message}`, {
        cause,
      });
    }
    if (a.status === 401 || a.status === 403) {
      return new LeaseholdError(
        'ERR_INVALID_ARGUMENT',
        `apiToken was refused by the server (${code}): ${message}`,
        {
          cause,
        },
      );
    }
    if (a.status === 400 || a.status === 413) {
      return new LeaseholdError('ERR_INVALID_ARGUMENT', message, { cause });
    }
    return new LeaseholdError(
      'ERR_PROTOCOL',
      `leasehold server: ${op}: unexpected ${a.status} ${code}: ${message}`,
      {
        cause,
      },
    );
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

/**
 * The batch limits to use with a server whose `/v1/info` said `limits`: the asked limits
 * narrowed to the server's; no batching when the server does not offer it.
 */
function batchLimits(
  asked: boolean | BatchLimits | undefined,
  limits: unknown,
): false | BatchLimits {
  if (asked === false) return false;
  const l = (typeof limits === 'object' && limits !== null ? limits : {}) as Record<
    string,
    unknown
  >;
  const ops = l['batchMaxOps'];
  const bytes = l['batchBodyLimitBytes'];
  if (typeof ops !== 'number' || typeof bytes !== 'number' || ops < 1 || bytes < 1024) return false;
  const want = asked === undefined || asked === true ? DEFAULT_BATCH_LIMITS : asked;
  return {
    maxOps: Math.min(want.maxOps, Math.floor(ops)),
    maxBytes: Math.min(want.maxBytes, Math.floor(bytes)),
  };
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** What one event on a key's stream says about the key, if anything. */
function changeOf(f: SseFrame): 'freed' | 'granted' | undefined {
  if (FREEING_EVENTS.has(f.event)) return 'freed';
  if (f.event === 'acquired') return 'granted';
  if (f.event !== 'changed') return undefined;
  // `changed` carries the holder's token when the server saw the key granted, none when free.
  try {
    const data = JSON.parse(f.data) as { token?: unknown };
    return typeof data.token === 'string' ? 'granted' : 'freed';
  } catch {
    return 'freed';
  }
}
