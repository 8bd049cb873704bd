// The request/answer transports the HTTP store could use instead of its own
// (`PooledHttpTransport`): undici's `Pool` and Node's `http` client with a keep-alive agent.
// For the side-by-side measurement in http-transport-ab.ts only: they implement what the
// measurement needs (requests, answers, timeouts), not the store's error-code rules.
import { Agent, request as httpRequest } from 'node:http';
import { Pool } from 'undici';
import type { RequestHooks, RequestTransport, TransportAnswer } from '../src/stores/http/client.js';

/** undici's connection pool, one request at a time per connection (as ours). */
export class UndiciPoolTransport implements RequestTransport {
  private readonly pool: Pool;
  private readonly basePath: string;

  constructor(base: URL) {
    this.pool = new Pool(base.origin, {
      connections: 256,
      pipelining: 1,
      keepAliveTimeout: 30_000,
    });
    this.basePath = base.pathname.replace(/\/+$/, '');
  }

  async request(
    method: string,
    path: string,
    headers: Readonly<Record<string, string>>,
    body: string | undefined,
    timeoutMs: number,
    hooks?: RequestHooks,
  ): Promise<TransportAnswer> {
    const res = await this.pool.request({
      method: method,
      path: this.basePath + path,
      headers,
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      ...(hooks?.signal ? { signal: hooks.signal } : {}),
      ...(hooks?.onInterim
        ? { onInfo: (info: { statusCode: number }) => hooks.onInterim!(info.statusCode) }
        : {}),
    });
    return { status: res.statusCode, text: await res.body.text() };
  }

  close(): void {
    void this.pool.close();
  }
}

/** Node's `http.request` over a keep-alive agent. */
export class NodeKeepAliveTransport implements RequestTransport {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 256 });
  private readonly basePath: string;

  constructor(private readonly base: URL) {
    this.basePath = base.pathname.replace(/\/+$/, '');
  }

  request(
    method: string,
    path: string,
    headers: Readonly<Record<string, string>>,
    body: string | undefined,
    timeoutMs: number,
    hooks?: RequestHooks,
  ): Promise<TransportAnswer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          agent: this.agent,
          host: this.base.hostname,
          port: this.base.port,
          method,
          path: this.basePath + path,
          headers:
            body === undefined
              ? headers
              : { ...headers, 'content-length': Buffer.byteLength(body) },
          timeout: timeoutMs,
          ...(hooks?.signal ? { signal: hooks.signal } : {}),
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          res.on('error', reject);
        },
      );
      if (hooks?.onInterim) req.on('information', (info) => hooks.onInterim!(info.statusCode));
      req.on('timeout', () =>
        req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })),
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
