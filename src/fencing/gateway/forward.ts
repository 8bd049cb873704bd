import type { Duplex } from 'node:stream';
import { Dispatcher, Pool } from 'undici';
import { AnswerCapture, pickRawAnswerHeaders } from '../http/answer-replay.js';

/** What became of one forward, as seen from the upstream connection. */
export type ForwardOutcome =
  /** The upstream answered (fully, or its body broke off: `complete` false). */
  | {
      readonly kind: 'answered';
      readonly status: number;
      /** The headers worth replaying (`REPLAYED_ANSWER_HEADERS`), when `capture` was asked. */
      readonly headers: Readonly<Record<string, string>>;
      /** The body when `capture` was asked and it fit; else undefined. */
      readonly body: Buffer | undefined;
      readonly complete: boolean;
    }
  /** The upstream was never reached (connection refused or the connect timed out). */
  | { readonly kind: 'not_sent'; readonly error: unknown }
  /** The upstream may have received the request but did not answer (timeout, reset, abort). */
  | { readonly kind: 'unknown'; readonly error: unknown };

/** The internal header that ties a forward to its tracker; removed before it leaves. */
export const FORWARD_ID_HEADER = 'x-leasehold-forward-id';

/** A forward being tracked: `done` resolves when the upstream exchange is over, either way. */
export interface TrackedForward {
  readonly id: string;
  readonly done: Promise<ForwardOutcome>;
  /** Ends the forward early (the outcome is whatever the exchange reached). */
  settle(outcome: ForwardOutcome): void;
}

const NOT_SENT = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN']);

/** Whether a forward's error means the upstream never received the request. */
export function neverSent(err: unknown): boolean {
  for (let e: unknown = err, i = 0; typeof e === 'object' && e !== null && i < 4; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'string' && NOT_SENT.has(c)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The keep-alive connection pool to the upstream, with a dispatcher that tells each tracked
 * forward when its upstream exchange really ended (answer complete or failed) and can abort
 * it (`abort(signal)`). The gateway holds a scope until then — not merely until its own
 * client went away — so a request still in flight upstream is never overtaken.
 *
 * The dispatcher wraps the handler in undici's callback interface (onConnect, onHeaders, …),
 * the one `@fastify/reply-from`'s requests use, and passes it to the pool as it is. An
 * interceptor made with `compose()` gets the other interface, so undici converts every
 * answer's headers twice (raw → object → raw) around it: that cost 10–25 µs of CPU per
 * request here, a tenth of a whole proxied request (see docs/benchmarks.md, gateway).
 */
export class UpstreamPool {
  readonly dispatcher: Dispatcher;
  private readonly pool: Pool;
  private nextId = 0;
  private readonly tracked = new Map<string, Tracked>();

  constructor(origin: string, options: Pool.Options) {
    this.pool = new Pool(origin, options);
    this.dispatcher = new TrackingDispatcher(this.pool, this.tracked);
  }

  /**
   * Starts tracking one forward: put `headers()` on the outgoing request. `signal` aborts the
   * upstream exchange (a lost scope hold).
   */
  track(capture: boolean, signal: AbortSignal | undefined, path: string): TrackedForward {
    // Only ties a request to its tracker inside this process: a counter is enough.
    const id = String(++this.nextId);
    let settle!: (o: ForwardOutcome) => void;
    const done = new Promise<ForwardOutcome>((resolve) => {
      settle = (o) => {
        if (!this.tracked.delete(id)) return;
        resolve(o);
      };
    });
    this.tracked.set(id, { capture, settle, signal, path });
    return { id, done, settle };
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }
}

interface Tracked {
  readonly capture: boolean;
  readonly settle: (o: ForwardOutcome) => void;
  readonly signal: AbortSignal | undefined;
  /** The request target to put on the request line, exactly (decision 032). */
  readonly path: string;
}

type Handler = Dispatcher.DispatchHandler;

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** The pool's dispatcher with the tracking of {@link UpstreamPool}. */
class TrackingDispatcher extends Dispatcher {
  constructor(
    private readonly pool: Pool,
    private readonly tracked: Map<string, Tracked>,
  ) {
    super();
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Handler): boolean {
    const headers = opts.headers as Record<string, string | string[] | undefined> | undefined;
    const id = headers?.[FORWARD_ID_HEADER];
    const entry = typeof id === 'string' ? this.tracked.get(id) : undefined;
    // undefined, not delete: undici skips it, and the object keeps its fast shape.
    if (headers !== undefined && id !== undefined) headers[FORWARD_ID_HEADER] = undefined;
    if (entry === undefined) return this.pool.dispatch(opts, handler);
    // The forward's own target, not the one reply-from rebuilt from its URL parse.
    (opts as { path: string }).path = entry.path;
    return this.pool.dispatch(opts, new TrackingHandler(entry, handler));
  }

  // reply-from closes and destroys the dispatcher it was given when fastify closes.
  override close(): Promise<void> {
    return this.pool.close();
  }

  override destroy(): Promise<void> {
    return this.pool.destroy();
  }
}

/**
 * Wraps a callback-interface handler: passes every call on, and settles the forward. A class
 * rather than an object of closures: one allocation per forward instead of a dozen, on the
 * path every request takes.
 */
class TrackingHandler implements Handler {
  private readonly capture: AnswerCapture | undefined;
  private status = 0;
  private headers: Readonly<Record<string, string>> = NO_HEADERS;
  private abortRef: ((err?: Error) => void) | undefined;
  private listening = false;

  constructor(
    private readonly entry: Tracked,
    private readonly handler: Handler,
  ) {
    this.capture = entry.capture ? new AnswerCapture() : undefined;
  }

  private readonly onAbort = (): void => this.abortRef?.(this.lostHold());

  private lostHold(): Error {
    return new Error('the scope hold was lost', { cause: this.entry.signal?.reason });
  }

  private finish(o: ForwardOutcome): void {
    if (this.listening) this.entry.signal?.removeEventListener('abort', this.onAbort);
    this.entry.settle(o);
  }

  onConnect(abort: (err?: Error) => void, context?: unknown): void {
    this.abortRef = abort;
    const signal = this.entry.signal;
    if (signal?.aborted) abort(this.lostHold());
    else if (signal !== undefined) {
      signal.addEventListener('abort', this.onAbort, { once: true });
      this.listening = true;
    }
    // The callback interface passes a context too; the typings know one argument only.
    (this.handler.onConnect as ((a: typeof abort, c: unknown) => void) | undefined)?.call(
      this.handler,
      abort,
      context,
    );
  }

  onUpgrade(statusCode: number, raw: Buffer[] | string[] | null, socket: Duplex): void {
    this.handler.onUpgrade?.(statusCode, raw, socket);
  }

  onResponseStarted(): void {
    this.handler.onResponseStarted?.();
  }

  onBodySent(chunkSize: number, total: number): void {
    this.handler.onBodySent?.(chunkSize, total);
  }

  onHeaders(statusCode: number, raw: Buffer[], resume: () => void, statusText: string): boolean {
    this.status = statusCode;
    if (this.capture !== undefined) this.headers = pickRawAnswerHeaders(raw);
    return this.handler.onHeaders?.(statusCode, raw, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    this.capture?.add(chunk);
    return this.handler.onData?.(chunk) ?? true;
  }

  onComplete(trailers: string[] | null): void {
    this.finish({
      kind: 'answered',
      status: this.status,
      headers: this.headers,
      body: this.capture?.body(),
      complete: true,
    });
    this.handler.onComplete?.(trailers);
  }

  onError(err: Error): void {
    this.finish(
      this.status !== 0
        ? {
            kind: 'answered',
            status: this.status,
            headers: this.headers,
            body: undefined,
            complete: false,
          }
        : neverSent(err)
          ? { kind: 'not_sent', error: err }
          : { kind: 'unknown', error: err },
    );
    if (this.handler.onError === undefined) throw err;
    this.handler.onError(err);
  }
}
