import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** One answer of the server: status and body text. */
export interface TransportAnswer {
  readonly status: number;
  readonly text: string;
}

/**
 * The request/answer calls the store makes (what {@link PooledHttpTransport} does): one
 * request, its whole answer within `timeoutMs`. Errors carry Node's codes (`ECONNREFUSED`,
 * `ECONNRESET`, …) so that the retry rules in `errors.ts` can tell what happened.
 */
export interface RequestTransport {
  request(
    method: string,
    path: string,
    headers: Readonly<Record<string, string>>,
    body: string | undefined,
    timeoutMs: number,
    hooks?: RequestHooks,
  ): Promise<TransportAnswer>;
  close(): void;
}

/** Extras of one request: cancellation, and the interim answers before the final one. */
export interface RequestHooks {
  /** Aborting closes the connection (the server sees the client leave) and rejects. */
  readonly signal?: AbortSignal;
  /** Called with the status of each interim (1xx) answer, e.g. `102` when a wait is parked. */
  readonly onInterim?: (status: number) => void;
}

/** The event streams the store opens (what {@link NodeHttpTransport} does). */
export interface StreamTransport {
  /** Opens a streaming GET; the caller reads or destroys the response. */
  stream(
    path: string,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<IncomingMessage>;
  close(): void;
}

/** Options for {@link NodeHttpTransport}. */
export interface TransportOptions {
  /** Extra CA certificates (PEM) to trust for `https:` servers. Defaults to the system's. */
  readonly ca?: string | Buffer;
}

/**
 * Server-sent event streams over Node's `http`/`https` modules with a keep-alive agent (a
 * stream is read as it arrives, which Node's `IncomingMessage` does well). Request/answer
 * calls go through the cheaper `PooledHttpTransport` instead. Idle sockets are closed
 * after 30 s, before the server's keep-alive timeout (72 s).
 */
export class NodeHttpTransport implements StreamTransport {
  private readonly agent: HttpAgent;
  private readonly doRequest: typeof httpRequest;
  private readonly basePath: string;

  constructor(
    private readonly base: URL,
    options: TransportOptions = {},
  ) {
    const https = base.protocol === 'https:';
    this.agent = https
      ? new HttpsAgent({ keepAlive: true, timeout: 30_000, scheduling: 'lifo', ca: options.ca })
      : new HttpAgent({ keepAlive: true, timeout: 30_000, scheduling: 'lifo' });
    this.doRequest = https ? httpsRequest : httpRequest;
    this.basePath = base.pathname.replace(/\/+$/, '');
  }

  /** Opens a streaming GET (server-sent events); the caller reads or destroys the response. */
  stream(
    path: string,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = this.doRequest(
        {
          protocol: this.base.protocol,
          hostname: this.base.hostname.replace(/^\[|\]$/g, ''),
          port: this.base.port,
          path: `${this.basePath}${path}`,
          method: 'GET',
          agent: this.agent,
          signal,
          headers,
        },
        resolve,
      );
      req.on('error', reject);
      req.end();
    });
  }

  /** Closes the sockets, ending open streams. */
  close(): void {
    this.agent.destroy();
  }
}
