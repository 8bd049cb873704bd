import assert from 'node:assert/strict';
import { createServer as createHttpServer, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { LeaseClient } from '../../../src/core/client.js';
import { createLeaseServer } from '../../../src/server/server.js';
import { connectionBroken, neverSent } from '../../../src/stores/http/errors.js';
import { PooledHttpTransport } from '../../../src/stores/http/pooled-transport.js';
import { HttpLeaseStore } from '../../../src/stores/http/store.js';
import { MemoryLeaseStore } from '../../../src/stores/memory/store.js';
import { Gate } from '../../support/gate.js';
import { eventually } from '../../support/time.js';
import { selfSignedCert } from '../../support/tls.js';
import { tempDir } from '../../support/tmp.js';

const JSON_HEADERS = { accept: 'application/json', 'content-type': 'application/json' };

/** A Node HTTP server answering `{"echo": body, "n": requestNumber}`; counts connections. */
async function echoServer(
  answer?: (res: ServerResponse, body: string) => void,
): Promise<{ url: URL; server: Server; connections: () => number; sockets: Set<Socket> }> {
  let connections = 0;
  let n = 0;
  const sockets = new Set<Socket>();
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (answer !== undefined) return answer(res, body);
      const text = JSON.stringify({ echo: body, n: ++n, path: req.url, host: req.headers.host });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': text.length });
      res.end(text);
    });
  });
  server.on('connection', (s: Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: new URL(`http://127.0.0.1:${port}/base/`),
    server,
    connections: () => connections,
    sockets,
  };
}

/** A raw TCP server that answers every request with `reply(socket)`. */
async function rawServer(
  reply: (socket: Socket) => void,
): Promise<{ url: URL; close: () => Promise<void>; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    let seen = '';
    s.on('data', (c: Buffer) => {
      seen += c.toString('latin1');
      if (seen.includes('\r\n\r\n')) {
        seen = '';
        reply(s);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: new URL(`http://127.0.0.1:${port}`),
    sockets,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

const closeServer = (s: Server): Promise<void> =>
  new Promise<void>((r) => {
    s.closeAllConnections();
    s.close(() => r());
  });

describe('PooledHttpTransport', () => {
  it('sends method, path under the base URL, host and headers, and reuses one socket for sequential requests', async () => {
    const srv = await echoServer();
    const t = new PooledHttpTransport(srv.url);
    try {
      for (let i = 1; i <= 20; i++) {
        const a = await t.request('POST', '/v1/x?y=1', JSON_HEADERS, `{"i":${i}}`, 5000);
        assert.equal(a.status, 200);
        assert.deepEqual(JSON.parse(a.text), {
          echo: `{"i":${i}}`,
          n: i,
          path: '/base/v1/x?y=1',
          host: srv.url.host,
        });
      }
      assert.equal(srv.connections(), 1, 'one keep-alive connection');
      assert.equal(t.connections, 1);
    } finally {
      t.close();
      await closeServer(srv.server);
    }
  });

  it('opens a socket per concurrent request and reuses them afterwards', async () => {
    const srv = await echoServer();
    const t = new PooledHttpTransport(srv.url);
    try {
      const burst = (): Promise<unknown> =>
        Promise.all(Array.from({ length: 16 }, () => t.request('GET', '/', {}, undefined, 5000)));
      await burst();
      const opened = srv.connections();
      assert.ok(opened >= 1 && opened <= 16, `${opened} connections`);
      await burst();
      await burst();
      assert.equal(srv.connections(), opened, 'later bursts reuse the pooled sockets');
    } finally {
      t.close();
      await closeServer(srv.server);
    }
  });

  it('reads chunked answers and answers split across several TCP writes', async () => {
    const gate = new Gate();
    const raw = await rawServer((s) => {
      s.write(
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n',
      );
      s.write('\r\n5\r\n{"a":\r\n');
      void gate.wait().then(() => s.write('5;ext=1\r\n"é"}\r\n0\r\n\r\n'));
    });
    const t = new PooledHttpTransport(raw.url);
    try {
      const pending = t.request('GET', '/', {}, undefined, 5000);
      await gate.reached; // the head and the first chunk are written
      gate.open();
      const a = await pending;
      assert.deepEqual(JSON.parse(a.text), { a: 'é' });
      assert.equal(t.connections, 1, 'a complete chunked answer leaves the socket reusable');
    } finally {
      t.close();
      await raw.close();
    }
  });

  it('does not reuse a socket the server answered with Connection: close', async () => {
    const srv = await echoServer((res) => {
      res.writeHead(200, { connection: 'close', 'content-length': 2 });
      res.end('{}');
    });
    const t = new PooledHttpTransport(srv.url);
    try {
      await t.request('GET', '/', {}, undefined, 5000);
      await t.request('GET', '/', {}, undefined, 5000);
      assert.equal(srv.connections(), 2);
    } finally {
      t.close();
      await closeServer(srv.server);
    }
  });

  it('drops an idle socket the server closed and connects anew', async () => {
    const srv = await echoServer();
    const t = new PooledHttpTransport(srv.url);
    try {
      await t.request('GET', '/', {}, undefined, 5000);
      for (const s of srv.sockets) s.destroy();
      await eventually('the client to see the close', () =>
        t.connections === 0 ? true : undefined,
      );
      const a = await t.request('GET', '/', {}, undefined, 5000);
      assert.equal(a.status, 200);
      assert.equal(srv.connections(), 2);
    } finally {
      t.close();
      await closeServer(srv.server);
    }
  });

  it('fails with a TimeoutError when no answer comes in time, and drops that socket', async () => {
    const raw = await rawServer(() => {
      // never answers
    });
    const t = new PooledHttpTransport(raw.url);
    try {
      const started = performance.now();
      await assert.rejects(t.request('GET', '/', {}, undefined, 200), (e: unknown) => {
        return e instanceof Error && e.name === 'TimeoutError';
      });
      assert.ok(performance.now() - started >= 190);
      assert.equal(t.connections, 0);
      await eventually('the server to see the socket closed', () =>
        raw.sockets.size === 0 ? true : undefined,
      );
    } finally {
      t.close();
      await raw.close();
    }
  });

  it('reports a refused connection as never sent, and a connection cut mid-answer as broken', async () => {
    const raw = await rawServer((s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{"a"');
      s.destroy();
    });
    const port = raw.url.port;
    const t = new PooledHttpTransport(raw.url);
    try {
      await assert.rejects(t.request('GET', '/', {}, undefined, 5000), (e: unknown) => {
        assert.ok(connectionBroken(e) && !neverSent(e), String(e));
        return true;
      });
    } finally {
      t.close();
      await raw.close();
    }
    const refused = new PooledHttpTransport(new URL(`http://127.0.0.1:${port}`));
    await assert.rejects(refused.request('GET', '/', {}, undefined, 5000), (e: unknown) => {
      assert.ok(neverSent(e), String(e));
      return true;
    });
    refused.close();
  });

  it('refuses malformed, unframed and oversize answers', async () => {
    const answers = [
      ['HTTP/9 200 OK\r\ncontent-length: 0\r\n\r\n', 'ERR_BAD_ANSWER'],
      ['HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil close', 'ERR_BAD_ANSWER'],
      ['HTTP/1.1 200 OK\r\ncontent-length: 12x\r\n\r\n', 'ERR_BAD_ANSWER'],
      [
        `HTTP/1.1 200 OK\r\ncontent-length: 3000\r\n\r\n${'x'.repeat(3000)}`,
        'ERR_ANSWER_TOO_LARGE',
      ],
    ] as const;
    for (const [text, code] of answers) {
      const raw = await rawServer((s) => s.write(text));
      const t = new PooledHttpTransport(raw.url, { maxAnswerBytes: 2048 });
      try {
        await assert.rejects(
          t.request('GET', '/', {}, undefined, 5000),
          (e: unknown) => (e as { code?: string }).code === code,
          code,
        );
      } finally {
        t.close();
        await raw.close();
      }
    }
  });

  it('rejects requests in flight and later ones after close()', async () => {
    const raw = await rawServer(() => {
      // never answers
    });
    const t = new PooledHttpTransport(raw.url);
    try {
      const pending = t.request('GET', '/', {}, undefined, 10_000);
      await eventually('the request to arrive', () => (raw.sockets.size > 0 ? true : undefined));
      t.close();
      const closed = (e: unknown): boolean =>
        (e as { code?: string }).code === 'ERR_TRANSPORT_CLOSED';
      await assert.rejects(pending, closed);
      await assert.rejects(t.request('GET', '/', {}, undefined, 1000), closed);
    } finally {
      await raw.close();
    }
  });
});

describe('HttpLeaseStore over HTTPS with a private CA', () => {
  const tmp = tempDir('https-store');
  after(() => tmp.remove());

  it('acquires and releases through the pooled TLS transport', async () => {
    const { cert, key } = selfSignedCert(tmp.dir);
    const server = createLeaseServer({
      store: new MemoryLeaseStore(),
      port: 0,
      tls: { cert, key },
      logLevel: 'silent',
      processMetrics: false,
      closeStore: true,
    });
    const url = await server.listen();
    try {
      await assert.rejects(
        HttpLeaseStore.connect({ url }),
        (e: unknown) =>
          e instanceof Error &&
          /ERR_UNAVAILABLE|certificate/i.test(`${(e as { code?: string }).code} ${e.message}`),
        'an unknown CA is refused',
      );
      const store = await HttpLeaseStore.connect({ url, ca: cert });
      const client = new LeaseClient({ store });
      const r = await client.acquire('tls/a', { ttl: 5000, autoRenew: false });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') await r.lease.release();
      const again = await client.acquire('tls/a', { ttl: 5000, autoRenew: false });
      assert.equal(again.status, 'acquired', 'the release went through');
      if (again.status === 'acquired') await again.lease.release();
      await client.close();
      await store.close();
    } finally {
      await server.close();
    }
  });
});
