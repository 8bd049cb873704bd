import { LeaseholdError } from '../../core/errors.js';
import type { TransportAnswer } from './client.js';
import { connectionBroken, neverSent, storeClosedError, type Answer } from './errors.js';

/** Which failed sends may be sent again: any broken connection, or only one never sent. */
export type Retry = 'idempotent' | 'not_sent_only';

/** The operations `POST /v1/batch` carries, each also an endpoint of its own. */
export type BatchOpName = 'acquire' | 'renew' | 'release';

/** How large a batch may be: the server's limits (from `/v1/info`). */
export interface BatchLimits {
  readonly maxOps: number;
  readonly maxBytes: number;
  /**
   * Most renewals in one `renewMany` request (a batch of renewals only). `connect` takes the
   * server's `batchMaxRenewals`; without it, {@link RENEWALS_PER_REQUEST_UNKNOWN_SERVER}.
   */
  readonly maxRenewals?: number;
}

/** Renewals per request to a server whose limit is not known: what every server accepts. */
export const RENEWALS_PER_REQUEST_UNKNOWN_SERVER = 128;

/**
 * The client's own limits, which `HttpLeaseStore.connect` narrows to the server's. At most 16
 * operations per request, not the server's 128: a turn of 32 calls leaves as two requests, and
 * the workers settle into two groups with a request in flight each, so the server works on one
 * group's batch while the client answers the other's. One request per turn keeps both sides in
 * lock step, each idle while the other works (decision 006: +13% cycles/s at 32 workers; −2
 * to −3%, within noise, at 64 and 100, where a turn leaves as several requests anyway).
 */
export const DEFAULT_BATCH_LIMITS: BatchLimits = Object.freeze({
  maxOps: 16,
  maxBytes: 512 * 1024,
});

/** What the batcher needs from its store. */
export interface BatchSink {
  /** Attempts per operation when the connection fails in a way that is safe to retry. */
  readonly attempts: number;
  /** Sends one `POST /v1/batch` body; rejects with the transport's error. */
  sendBatch(text: string, timeoutMs: number): Promise<TransportAnswer>;
  /** Sends one operation on its own endpoint, with the store's usual retries. */
  sendOne(
    op: BatchOpName,
    body: Record<string, unknown>,
    retry: Retry,
    timeoutMs: number,
  ): Promise<Answer>;
  /** True once the store is closed. */
  closed(): boolean;
  /** The error of an operation that could not be sent or answered. */
  unreachable(cause: unknown): LeaseholdError;
}

interface Pending {
  readonly op: BatchOpName;
  readonly body: Record<string, unknown>;
  readonly retry: Retry;
  readonly deadline: number;
  attempt: number;
  readonly resolve: (a: Answer) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Sends the acquire, renew and release operations asked for in one event-loop turn together
 * as `POST /v1/batch` requests of at most `limits.maxOps` (16 by default, within the server's
 * limits; see {@link DEFAULT_BATCH_LIMITS}), like the Redis store sends one turn's
 * commands in one write. Thirty-two workers over one store then cost the server a few HTTP
 * requests per round instead of thirty-two, and the store behind it sees them together. A
 * lone operation goes to its own endpoint, so nothing waits for company.
 *
 * Each operation keeps its own retry rule: when a batch's connection breaks, acquire (it
 * carries the client's lease id) and renew (conditional) are sent again; a release only when
 * the batch was certainly not sent. A batch the server refuses whole (400/413: nothing ran)
 * is resent as single requests, which answer each operation's own error; a server without
 * the route (404) turns batching off.
 */
export class RequestBatcher {
  private queue: Pending[] = [];
  private scheduled = false;
  private enabled = true;

  constructor(
    private readonly sink: BatchSink,
    private readonly limits: BatchLimits,
  ) {}

  /** Whether operations are still batched (false after the server turned out not to batch). */
  get active(): boolean {
    return this.enabled;
  }

  submit(
    op: BatchOpName,
    body: Record<string, unknown>,
    retry: Retry,
    timeoutMs: number,
  ): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      this.queue.push({
        op,
        body,
        retry,
        deadline: performance.now() + timeoutMs,
        attempt: 1,
        resolve,
        reject,
      });
      this.schedule();
    });
  }

  /**
   * Flushes at `process.nextTick`: after this turn's promise continuations, so every worker
   * woken by the last answer has asked by then.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(() => this.flush());
  }

  /** Fails every queued operation (the store is closing). */
  failQueued(err: unknown): void {
    const queued = this.queue;
    this.queue = [];
    for (const p of queued) p.reject(err);
  }

  private flush(): void {
    this.scheduled = false;
    const queued = this.queue;
    this.queue = [];
    if (queued.length === 0) return;
    if (this.sink.closed()) return this.failAll(queued, storeClosedError());
    let chunk: Pending[] = [];
    let texts: string[] = [];
    let bytes = 0;
    for (const p of queued) {
      const text = JSON.stringify({ op: p.op, ...p.body });
      const size = Buffer.byteLength(text);
      // `{"ops":[`, `]}` and a comma after each operation but the last: 10 bytes of envelope.
      if (
        chunk.length > 0 &&
        (chunk.length >= this.limits.maxOps || bytes + size + 10 > this.limits.maxBytes)
      ) {
        this.send(chunk, texts);
        chunk = [];
        texts = [];
        bytes = 0;
      }
      chunk.push(p);
      texts.push(text);
      bytes += size + 1;
    }
    this.send(chunk, texts);
  }

  private send(chunk: Pending[], texts: string[]): void {
    if (chunk.length === 1 || !this.enabled) {
      for (const p of chunk) this.one(p);
      return;
    }
    // The request lives as long as its most patient operation; one that gives up sooner is
    // answered `unavailable` at its own deadline, as its own request would have been.
    const now = performance.now();
    let deadline = -Infinity;
    for (const p of chunk) if (p.deadline > deadline) deadline = p.deadline;
    const left = Math.ceil(deadline - now);
    if (left <= 0)
      return this.failAll(chunk, this.sink.unreachable(new Error('no answer in time')));
    let timers: Array<ReturnType<typeof setTimeout>> | undefined;
    for (const p of chunk) {
      if (p.deadline >= deadline - 1) continue;
      const timer = setTimeout(
        () => p.reject(this.sink.unreachable(new Error('no answer in time'))),
        Math.max(0, p.deadline - now),
      );
      (timers ??= []).push(timer);
    }
    const settled = (): void => {
      if (timers !== undefined) for (const t of timers) clearTimeout(t);
    };
    this.sink.sendBatch(`{"ops":[${texts.join(',')}]}`, left).then(
      (res) => {
        settled();
        this.answered(chunk, res);
      },
      (err: unknown) => {
        settled();
        this.broken(chunk, err);
      },
    );
  }

  private one(p: Pending): void {
    const left = Math.ceil(p.deadline - performance.now());
    if (left <= 0) return p.reject(this.sink.unreachable(new Error('no answer in time')));
    this.sink.sendOne(p.op, p.body, p.retry, left).then(p.resolve, p.reject);
  }

  private answered(chunk: Pending[], res: TransportAnswer): void {
    if (res.status === 404) {
      this.enabled = false;
      for (const p of chunk) this.one(p);
      return;
    }
    if (res.status === 400 || res.status === 413) {
      for (const p of chunk) this.one(p);
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(res.text);
    } catch (err) {
      if (res.status >= 500) {
        for (const p of chunk) p.resolve({ status: res.status, body: {} });
        return;
      }
      return this.failAll(
        chunk,
        new LeaseholdError('ERR_UNAVAILABLE', `the server answered ${res.status} without JSON`, {
          cause: err,
        }),
      );
    }
    const body = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<
      string,
      unknown
    >;
    if (res.status !== 200) {
      // Refused whole (401, 403, 503 while closing, ...): each operation gets that answer.
      for (const p of chunk) p.resolve({ status: res.status, body });
      return;
    }
    const results = body['results'];
    if (!Array.isArray(results) || results.length !== chunk.length) {
      return this.failAll(
        chunk,
        new LeaseholdError(
          'ERR_PROTOCOL',
          'leasehold server: batch: results do not match the operations',
        ),
      );
    }
    for (let i = 0; i < chunk.length; i++) {
      const r = results[i] as { httpStatus?: unknown; body?: unknown } | null;
      const p = chunk[i]!;
      if (
        typeof r !== 'object' ||
        r === null ||
        typeof r.httpStatus !== 'number' ||
        typeof r.body !== 'object' ||
        r.body === null
      ) {
        p.reject(new LeaseholdError('ERR_PROTOCOL', 'leasehold server: batch: malformed result'));
        continue;
      }
      p.resolve({ status: r.httpStatus, body: r.body as Record<string, unknown> });
    }
  }

  private broken(chunk: Pending[], err: unknown): void {
    if (this.sink.closed()) return this.failAll(chunk, storeClosedError());
    const now = performance.now();
    for (const p of chunk) {
      const safe = p.retry === 'idempotent' ? connectionBroken(err) : neverSent(err);
      if (safe && p.attempt < this.sink.attempts && p.deadline > now) {
        p.attempt++;
        this.queue.push(p);
        this.schedule();
      } else {
        p.reject(this.sink.unreachable(err));
      }
    }
  }

  private failAll(chunk: Pending[], err: unknown): void {
    for (const p of chunk) p.reject(err);
  }
}
