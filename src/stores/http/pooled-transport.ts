import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { traceHeaders } from '../../core/runtime/trace-context.js';
import type { RequestHooks, RequestTransport, TransportAnswer } from './client.js';

/** Options for {@link PooledHttpTransport}. */
export interface PooledTransportOptions {
  /** Extra CA certificates (PEM) to trust for `https:` servers. Defaults to the system's. */
  readonly ca?: string | Buffer;
  /** Idle sockets are closed after this long. Defaults to 30 s (the server keeps them 72 s). */
  readonly idleTimeoutMs?: number;
  /** Largest answer accepted; a larger one fails the request. Defaults to 1 MiB. */
  readonly maxAnswerBytes?: number;
}

const CRLF2 = Buffer.from('\r\n\r\n');

/** A transport error with a Node-style `code`, so the retry rules can tell what happened. */
function codedError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * HTTP/1.1 requests over a pool of keep-alive sockets (TCP or TLS), one request at a time per
 * socket, answers framed by `Content-Length` or chunked encoding. Made for the lease API's
 * small JSON requests: on loopback it costs about a fifth of the CPU of Node's `http` client
 * per request (no ClientRequest, IncomingMessage, agent bookkeeping or header validation on
 * every call), which at a few thousand requests per second is most of the client's time. Kept
 * against undici's `Pool` by a measured margin (decision 048).
 *
 * Errors keep Node's codes: `ECONNREFUSED` (never sent), `ECONNRESET` / `EPIPE` (the
 * connection broke; the request may have been processed), a `TimeoutError` after `timeoutMs`,
 * `ERR_TRANSPORT_CLOSED` after {@link close}.
 */
export class PooledHttpTransport implements RequestTransport {
  private readonly idle: Connection[] = [];
  private readonly open = new Set<Connection>();
  private readonly hostHeader: string;
  private readonly basePath: string;
  private readonly idleTimeoutMs: number;
  private readonly maxAnswerBytes: number;
  private closed = false;

  constructor(
    private readonly base: URL,
    private readonly options: PooledTransportOptions = {},
  ) {
    this.hostHeader = base.host;
    this.basePath = base.pathname.replace(/\/+$/, '');
    this.idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
    this.maxAnswerBytes = options.maxAnswerBytes ?? 1 << 20;
  }

  /** Open sockets (idle or busy). */
  get connections(): number {
    return this.open.size;
  }

  /** Sends one request and reads the whole answer within `timeoutMs`. */
  request(
    method: string,
    path: string,
    headers: Readonly<Record<string, string>>,
    body: string | undefined,
    timeoutMs: number,
    hooks?: RequestHooks,
  ): Promise<TransportAnswer> {
    if (this.closed) return Promise.reject(closedError());
    if (hooks?.signal?.aborted === true) return Promise.reject(abortedError());
    let head = `${method} ${this.basePath}${path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
    for (const name in headers) head += `${name}: ${headers[name]}\r\n`;
    // The caller's trace, when there is one: the server's spans continue it.
    const trace = traceHeaders();
    if (trace !== undefined) for (const name in trace) head += `${name}: ${trace[name]}\r\n`;
    if (body !== undefined) head += `content-length: ${Buffer.byteLength(body)}\r\n`;
    const text = body === undefined ? `${head}\r\n` : `${head}\r\n${body}`;
    const conn = this.idle.pop() ?? this.connect();
    return conn.exchange(text, timeoutMs, hooks);
  }

  /** Ends requests in flight (they reject) and closes every socket. */
  close(): void {
    this.closed = true;
    for (const c of [...this.open]) c.destroy(closedError());
    this.idle.length = 0;
  }

  private connect(): Connection {
    const port = Number(this.base.port) || (this.base.protocol === 'https:' ? 443 : 80);
    const host = this.base.hostname.replace(/^\[|\]$/g, '');
    const socket =
      this.base.protocol === 'https:'
        ? tlsConnect({
            host,
            port,
            // SNI takes host names only, not IP addresses.
            ...(/^[\d.]+$|:/.test(host) ? {} : { servername: host }),
            ALPNProtocols: ['http/1.1'],
            ...(this.options.ca === undefined ? {} : { ca: this.options.ca }),
          })
        : netConnect({ host, port });
    socket.setNoDelay(true);
    const conn = new Connection(socket, this.maxAnswerBytes, {
      reusable: (c) => {
        if (this.closed) return c.destroy(closedError());
        c.idleFor(this.idleTimeoutMs);
        this.idle.push(c);
      },
      gone: (c) => {
        this.open.delete(c);
        const i = this.idle.indexOf(c);
        if (i >= 0) this.idle.splice(i, 1);
      },
    });
    this.open.add(conn);
    return conn;
  }
}

interface Pending {
  readonly resolve: (a: TransportAnswer) => void;
  readonly reject: (err: Error) => void;
  readonly timer: ReturnType<typeof setTimeout>;
  readonly hooks: RequestHooks | undefined;
  readonly onAbort: (() => void) | undefined;
  /** Interim (1xx) answers reported to `hooks.onInterim` so far. */
  interimSeen: number;
}

/** One socket: at most one request in flight; back to the pool after a complete answer. */
class Connection {
  private chunks: Buffer[] = [];
  private received = 0;
  private pending: Pending | undefined;
  private dead = false;

  constructor(
    private readonly socket: Socket,
    private readonly maxAnswerBytes: number,
    private readonly pool: { reusable(c: Connection): void; gone(c: Connection): void },
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () =>
      this.destroy(codedError('ECONNRESET', 'the server closed the connection')),
    );
    socket.on('timeout', () => this.destroy(codedError('ETIMEDOUT', 'idle connection closed')));
  }

  exchange(text: string, timeoutMs: number, hooks?: RequestHooks): Promise<TransportAnswer> {
    return new Promise<TransportAnswer>((resolve, reject) => {
      if (this.dead) return reject(codedError('ECONNRESET', 'connection already closed'));
      const timer = setTimeout(
        () =>
          this.destroy(
            new DOMException(`no answer within ${timeoutMs}ms`, 'TimeoutError') as Error,
          ),
        timeoutMs,
      );
      timer.unref();
      // An abort ends the exchange by closing the socket: the server sees its client leave.
      const signal = hooks?.signal;
      const onAbort = signal === undefined ? undefined : () => this.destroy(abortedError());
      if (onAbort !== undefined) signal?.addEventListener('abort', onAbort, { once: true });
      this.pending = { resolve, reject, timer, hooks, onAbort, interimSeen: 0 };
      this.socket.setTimeout(0);
      this.socket.ref();
      this.socket.write(text);
    });
  }

  /** Parks the socket: it does not keep the process alive and closes after `ms` unused. */
  idleFor(ms: number): void {
    this.socket.unref();
    this.socket.setTimeout(ms);
  }

  destroy(err: Error): void {
    if (this.dead) return;
    this.dead = true;
    this.socket.destroy();
    this.pool.gone(this);
    const p = this.pending;
    this.pending = undefined;
    if (p !== undefined) {
      settle(p);
      p.reject(err);
    }
  }

  private onData(chunk: Buffer): void {
    if (this.pending === undefined) {
      // Nothing was asked: a server that talks out of turn is not spoken to again.
      return this.destroy(codedError('ECONNRESET', 'unexpected data from the server'));
    }
    this.chunks.push(chunk);
    this.received += chunk.length;
    if (this.received > this.maxAnswerBytes) {
      return this.destroy(codedError('ERR_ANSWER_TOO_LARGE', 'the answer is too large'));
    }
    let answer: ParsedAnswer | undefined;
    const interim: number[] = [];
    const p = this.pending;
    try {
      answer = parseAnswer(this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks), interim);
    } catch (err) {
      return this.destroy(err as Error);
    }
    // The buffer is parsed from its start each time: report only the interim answers not
    // reported yet.
    while (p.interimSeen < interim.length) p.hooks?.onInterim?.(interim[p.interimSeen++]!);
    if (answer === undefined || this.pending !== p) return; // incomplete: wait for more
    this.pending = undefined;
    this.chunks = [];
    this.received = 0;
    settle(p);
    if (answer.keepAlive && answer.rest === 0) this.pool.reusable(this);
    else this.destroy(codedError('ECONNRESET', 'connection not reusable'));
    p.resolve({ status: answer.status, text: answer.text });
  }
}

interface ParsedAnswer {
  readonly status: number;
  readonly text: string;
  readonly keepAlive: boolean;
  /** Bytes after the answer (a protocol error for one request at a time). */
  readonly rest: number;
}

function settle(p: Pending): void {
  clearTimeout(p.timer);
  if (p.onAbort !== undefined) p.hooks?.signal?.removeEventListener('abort', p.onAbort);
}

/**
 * Parses one complete HTTP/1.1 answer from `buf`, or returns undefined while it is
 * incomplete. Skips interim 1xx answers, pushing their statuses onto `interim`. Throws on a
 * malformed or unframed answer.
 */
function parseAnswer(buf: Buffer, interim: number[]): ParsedAnswer | undefined {
  let start = 0;
  for (;;) {
    const end = buf.indexOf(CRLF2, start);
    if (end < 0) return undefined;
    const lines = buf.toString('latin1', start, end).split('\r\n');
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? '');
    if (m === null) throw codedError('ERR_BAD_ANSWER', 'malformed HTTP status line');
    const status = Number(m[2]);
    let length: number | undefined;
    let chunked = false;
    let close = m[1] === '0';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line
        .slice(colon + 1)
        .trim()
        .toLowerCase();
      if (name === 'content-length') {
        if (!/^\d{1,9}$/.test(value)) throw codedError('ERR_BAD_ANSWER', 'bad content-length');
        length = Number(value);
      } else if (name === 'transfer-encoding') chunked = value.endsWith('chunked');
      else if (name === 'connection') close = value.includes('close');
    }
    const bodyAt = end + 4;
    if (status >= 100 && status < 200 && status !== 101) {
      interim.push(status);
      start = bodyAt; // interim answer: the real one follows
      continue;
    }
    if (chunked) {
      const body = dechunk(buf, bodyAt);
      if (body === undefined) return undefined;
      return { status, text: body.text, keepAlive: !close, rest: buf.length - body.end };
    }
    if (length === undefined) {
      if (status === 204 || status === 304) length = 0;
      else throw codedError('ERR_BAD_ANSWER', 'an answer without a length');
    }
    if (buf.length < bodyAt + length) return undefined;
    return {
      status,
      text: buf.toString('utf8', bodyAt, bodyAt + length),
      keepAlive: !close,
      rest: buf.length - bodyAt - length,
    };
  }
}

/** Decodes a chunked body starting at `at`, or undefined while incomplete. */
function dechunk(buf: Buffer, at: number): { text: string; end: number } | undefined {
  const parts: Buffer[] = [];
  let i = at;
  for (;;) {
    const eol = buf.indexOf('\r\n', i);
    if (eol < 0) return undefined;
    const size = parseInt(buf.toString('latin1', i, eol).split(';')[0]!.trim(), 16);
    if (!Number.isInteger(size) || size < 0) throw codedError('ERR_BAD_ANSWER', 'bad chunk size');
    if (size === 0) {
      // Trailers (usually none) end with an empty line.
      const trailerEnd = buf.indexOf(CRLF2, eol);
      if (buf.length >= eol + 4 && buf[eol + 2] === 13 && buf[eol + 3] === 10) {
        return { text: Buffer.concat(parts).toString('utf8'), end: eol + 4 };
      }
      if (trailerEnd < 0) return undefined;
      return { text: Buffer.concat(parts).toString('utf8'), end: trailerEnd + 4 };
    }
    if (buf.length < eol + 2 + size + 2) return undefined;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}

function abortedError(): Error {
  const err = codedError('ABORT_ERR', 'the request was aborted');
  err.name = 'AbortError';
  return err;
}

function closedError(): Error {
  return codedError('ERR_TRANSPORT_CLOSED', 'the HTTP transport was closed');
}
