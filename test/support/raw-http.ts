import { connect } from 'node:net';

/** An HTTP answer read off a raw socket. */
export interface RawAnswer {
  readonly status: number;
  /** Header names lowercased. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * Writes `request` (bytes exactly as given, so framing can be broken on purpose) to a fresh
 * TCP connection to `url`'s host and port, and reads the one answer that comes back: status
 * line, headers, and a body framed by Content-Length or chunked encoding. Rejects when the
 * connection closes before a complete answer, or after `timeoutMs`.
 */
export function rawRequest(
  url: string,
  request: string | Buffer,
  timeoutMs = 10_000,
): Promise<RawAnswer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname);
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = (err: Error | undefined, answer?: RawAnswer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve(answer!);
    };
    const timer = setTimeout(
      () =>
        finish(
          new Error(`no complete answer within ${timeoutMs}ms: ${buf.toString().slice(0, 300)}`),
        ),
      timeoutMs,
    );
    const tryParse = (): void => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1').split('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
      if (m === null) return finish(new Error(`not an HTTP answer: ${head[0]}`));
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      const rest = buf.subarray(end + 4);
      const status = Number(m[1]);
      // An event stream does not end: its headers are the answer.
      if ((headers['content-type'] ?? '').startsWith('text/event-stream')) {
        return finish(undefined, { status, headers, body: '' });
      }
      const length = headers['content-length'];
      if (length !== undefined) {
        if (rest.length < Number(length)) return;
        return finish(undefined, {
          status,
          headers,
          body: rest.subarray(0, Number(length)).toString(),
        });
      }
      if (headers['transfer-encoding'] === 'chunked') {
        const chunks: Buffer[] = [];
        let at = 0;
        for (;;) {
          const eol = rest.indexOf('\r\n', at);
          if (eol < 0) return;
          const size = parseInt(rest.subarray(at, eol).toString(), 16);
          if (size === 0)
            return finish(undefined, { status, headers, body: Buffer.concat(chunks).toString() });
          if (rest.length < eol + 2 + size + 2) return;
          chunks.push(rest.subarray(eol + 2, eol + 2 + size));
          at = eol + 2 + size + 2;
        }
      }
      // Neither: the body runs to the end of the connection (read on close).
    };
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      tryParse();
    });
    // A server that refuses a request may reset the connection right after its answer.
    const onEnd = (err?: Error): void => {
      if (settled) return;
      const end = buf.indexOf('\r\n\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(buf.toString('latin1'));
      if (end >= 0 && m !== null) {
        finish(undefined, {
          status: Number(m[1]),
          headers: {},
          body: buf.subarray(end + 4).toString(),
        });
      } else {
        finish(
          err ?? new Error(`connection closed without an answer: ${buf.toString().slice(0, 300)}`),
        );
      }
    };
    socket.on('close', () => onEnd());
    socket.on('error', (err) => onEnd(err));
    socket.write(request);
  });
}
