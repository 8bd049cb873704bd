import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/** Whether the HTTP client of a request went away before its answer was sent. */
export interface ClientWatch {
  readonly left: boolean;
  signal(): AbortSignal;
}

/**
 * Watches for the HTTP client going away before its answer is sent: `left` turns true, and
 * `signal()` fires. Nothing is registered per request: `left` reads the response's state
 * (Node marks a response destroyed when it emits `close`, and only a response whose client
 * left is destroyed before it finished), and the `close` listener and AbortController are made
 * on the first `signal()` (most acquisitions never wait; a listener or an AbortController per
 * request is measurable).
 */
export function clientWatch(reply: FastifyReply): ClientWatch {
  return new ResponseWatch(reply.raw);
}

class ResponseWatch implements ClientWatch {
  private ac: AbortController | undefined;

  constructor(private readonly res: ServerResponse) {}

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
