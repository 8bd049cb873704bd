import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/** Whether the HTTP client of a request went away before its answer was sent. */
export interface ClientWatch {
  readonly left: boolean;
  signal(): AbortSignal;
  /**
   * Tells the client that its acquire is parked in the key's queue, when the request asked
   * for it with `Prefer: leasehold-parked`: an interim `102 Processing` answer before the
   * final one (HTTP/1.1 only; clients must accept 1xx answers, RFC 9110 §15.2). Else nothing.
   */
  parked(): void;
}

/** The preference that asks for a `102 Processing` once a waiting acquire is parked. */
export const PARKED_PREFERENCE = 'leasehold-parked';

/**
 * Watches for the HTTP client going away before its answer is sent: `left` turns true, and
 * `signal()` fires. Nothing is registered per request: `left` reads the response's state
 * (Node marks a response destroyed when it emits `close`, and only a response whose client
 * left is destroyed before it finished), and the `close` listener and AbortController are made
 * on the first `signal()` (most acquisitions never wait; a listener or an AbortController per
 * request is measurable).
 */
export function clientWatch(reply: FastifyReply): ClientWatch {
  const prefer = reply.request.headers.prefer;
  const wantsParked =
    typeof prefer === 'string' &&
    prefer.includes(PARKED_PREFERENCE) &&
    reply.request.raw.httpVersion === '1.1';
  return new ResponseWatch(reply.raw, wantsParked);
}

class ResponseWatch implements ClientWatch {
  private ac: AbortController | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly wantsParked: boolean,
  ) {}

  parked(): void {
    if (this.wantsParked && !this.res.headersSent && !this.res.destroyed) {
      this.res.writeProcessing();
    }
  }

  get left(): boolean {
    return this.res.destroyed && !this.res.writableFinished;
  }

  signal(): AbortSignal {
    if (this.ac === undefined) {
      const ac = new AbortController();
      this.ac = ac;
      if (this.left) ac.abort(new Error('client went away'));
      else {
        this.res.once('close', () => {
          if (!this.res.writableFinished) ac.abort(new Error('client went away'));
        });
      }
    }
    return this.ac.signal;
  }
}
