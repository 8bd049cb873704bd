import { Pool, type Dispatcher } from 'undici';
import { MAX_STORED_ANSWER_BYTES } from '../marks/mark-store.js';

/** What became of one forward, as seen from the upstream connection. */
export type ForwardOutcome =
  /** The upstream answered (fully, or its body broke off: `complete` false). */
  | {
      readonly kind: 'answered';
      readonly status: number;
      readonly contentType: string | undefined;
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
 * The keep-alive connection pool to the upstream, with an interceptor that tells each
 * tracked forward when its upstream exchange really ended (answer complete or failed) and
 * can abort it (`abort(signal)`). The gateway holds a scope until then — not merely until
 * its own client went away — so a request still in flight upstream is never overtaken.
 */
export class UpstreamPool {
  readonly dispatcher: Dispatcher;
  private readonly pool: Pool;
  private nextId = 0;
  private readonly tracked = new Map<
    string,
    {
      capture: boolean;
      settle: (o: ForwardOutcome) => void;
      signal: AbortSignal | undefined;
    }
  >();

  constructor(origin: string, options: Pool.Options) {
    this.pool = new Pool(origin, options);
    this.dispatcher = this.pool.compose((dispatch) => (opts, handler) => {
      const headers = opts.headers as Record<string, string | string[] | undefined> | undefined;
      const id = headers?.[FORWARD_ID_HEADER];
      const entry = typeof id === 'string' ? this.tracked.get(id) : undefined;
      // undefined, not delete: undici skips it, and the object keeps its fast shape.
      if (headers !== undefined && id !== undefined) headers[FORWARD_ID_HEADER] = undefined;
      if (entry === undefined) return dispatch(opts, handler);
      const chunks: Buffer[] = [];
      let size = 0;
      let status = 0;
      let contentType: string | undefined;
      let over = !entry.capture;
      const lostHold = (): Error =>
        new Error('the scope hold was lost', { cause: entry.signal?.reason });
      const onAbort = (): void => controllerRef?.abort(lostHold());
      let controllerRef: Dispatcher.DispatchController | undefined;
      const finish = (o: ForwardOutcome): void => {
        entry.signal?.removeEventListener('abort', onAbort);
        entry.settle(o);
      };
      const wrapped: Dispatcher.DispatchHandler = {
        onRequestStart: (controller, context) => {
          controllerRef = controller;
          if (entry.signal?.aborted) controller.abort(lostHold());
          else entry.signal?.addEventListener('abort', onAbort, { once: true });
          handler.onRequestStart?.(controller, context);
        },
        onRequestUpgrade: (controller, statusCode, h, socket) =>
          handler.onRequestUpgrade?.(controller, statusCode, h, socket),
        onResponseStart: (controller, statusCode, h, message) => {
          status = statusCode;
          const ct = h['content-type'];
          contentType = Array.isArray(ct) ? ct[0] : ct;
          handler.onResponseStart?.(controller, statusCode, h, message);
        },
        onResponseData: (controller, chunk) => {
          if (!over) {
            size += chunk.length;
            if (size > MAX_STORED_ANSWER_BYTES) {
              over = true;
              chunks.length = 0;
            } else chunks.push(Buffer.from(chunk));
          }
          handler.onResponseData?.(controller, chunk);
        },
        onResponseEnd: (controller, trailers) => {
          finish({
            kind: 'answered',
            status,
            contentType,
            body: over ? undefined : Buffer.concat(chunks),
            complete: true,
          });
          handler.onResponseEnd?.(controller, trailers);
        },
        onResponseError: (controller, err) => {
          finish(
            status !== 0
              ? { kind: 'answered', status, contentType, body: undefined, complete: false }
              : neverSent(err)
                ? { kind: 'not_sent', error: err }
                : { kind: 'unknown', error: err },
          );
          handler.onResponseError?.(controller, err);
        },
      };
      return dispatch(opts, wrapped);
    });
  }

  /**
   * Starts tracking one forward: put `headers()` on the outgoing request. `signal` aborts the
   * upstream exchange (a lost scope hold).
   */
  track(capture: boolean, signal?: AbortSignal): TrackedForward {
    // Only ties a request to its tracker inside this process: a counter is enough.
    const id = String(++this.nextId);
    let settle!: (o: ForwardOutcome) => void;
    const done = new Promise<ForwardOutcome>((resolve) => {
      settle = (o) => {
        if (!this.tracked.delete(id)) return;
        resolve(o);
      };
    });
    this.tracked.set(id, { capture, settle, signal });
    return { id, done, settle };
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }
}
