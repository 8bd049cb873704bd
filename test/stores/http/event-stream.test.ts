import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { WatchChange } from '../../../src/core/store.js';
import { readSse, type SseFrame } from '../../../src/stores/http/notify.js';
import { HttpLeaseStore } from '../../../src/stores/http/store.js';
import { startTestServer } from '../../support/lease-server.js';
import { uniqueKey } from '../../support/keys.js';

/**
 * A real HTTP server whose event streams end their lines with CRLF (or CR alone), as servers
 * behind some proxies and frameworks do; every stream it opens is handed to the test.
 */
class CrlfServer {
  readonly streams: Array<{ req: IncomingMessage; res: ServerResponse; at: number }> = [];
  private readonly waiting: Array<() => void> = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<CrlfServer> {
    const ref: { s?: CrlfServer } = {};
    const server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      res.flushHeaders();
      ref.s!.streams.push({ req, res, at: performance.now() });
      for (const w of ref.s!.waiting.splice(0)) w();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    ref.s = new CrlfServer(server, `http://127.0.0.1:${port}`);
    return ref.s;
  }

  /** The `n`th stream opened (0-based), once it is open (bounded). */
  async stream(n: number): Promise<{ req: IncomingMessage; res: ServerResponse; at: number }> {
    const until = performance.now() + 10_000;
    while (this.streams.length <= n) {
      assert.ok(performance.now() < until, `stream ${n} was not opened within 10 s`);
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        setTimeout(resolve, 1000).unref();
      });
    }
    return this.streams[n]!;
  }

  async close(): Promise<void> {
    for (const s of this.streams) s.res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Calls of a watch's `onChange`, each resolving the next `next()`. */
function recorder(): { onChange: (c?: WatchChange) => void; next: () => Promise<string> } {
  const seen: string[] = [];
  const waiters: Array<(v: string) => void> = [];
  return {
    onChange: (c) => {
      const v = c ?? 'freed';
      const w = waiters.shift();
      if (w !== undefined) w(v);
      else seen.push(v);
    },
    next: () =>
      seen.length > 0
        ? Promise.resolve(seen.shift()!)
        : new Promise<string>((resolve, reject) => {
            waiters.push(resolve);
            setTimeout(() => reject(new Error('no onChange within 10 s')), 10_000).unref();
          }),
  };
}

describe('the event-stream reader of leasehold/http', () => {
  let server: CrlfServer;
  before(async () => {
    server = await CrlfServer.start();
  });
  after(async () => {
    await server.close();
  });

  it(
    'reads CRLF- and CR-framed events with their ids, multi-line data and retry, however the chunks split',
    { timeout: 20_000 },
    async () => {
      const res = await fetch(`${server.url}/any`);
      const { res: out } = await server.stream(0);
      const retries: number[] = [];
      const frames: SseFrame[] = [];
      const reading = (async () => {
        for await (const f of readSse(res.body as unknown as AsyncIterable<Uint8Array>, {
          onRetry: (ms) => retries.push(ms),
        }))
          frames.push(f);
      })();
      const text =
        ': hello\r\nretry: 1500\r\n\r\n' +
        'id: 41\r\nevent: ready\r\ndata: {"key":"k"}\r\n\r\n' +
        'id: 42\r\nevent: released\r\ndata: line one\r\ndata: line two\r\n\r\n' +
        'id: 43\rdata: cr only\r\r: bye\r\n';
      // Split between every CR and its LF, so no chunk boundary falls where it is easy.
      for (const piece of text.split(/(?<=\r)/)) {
        out.write(piece);
        await new Promise((r) => setImmediate(r));
      }
      out.end();
      await reading;
      assert.deepEqual(frames, [
        { event: 'ready', data: '{"key":"k"}', id: '41' },
        { event: 'released', data: 'line one\nline two', id: '42' },
        { event: 'message', data: 'cr only', id: '43' },
      ]);
      assert.deepEqual(retries, [1500]);
    },
  );

  it(
    'a watch over a CRLF-framed stream is live at ready, reports releases and grants, and reconnects after retry with Last-Event-ID',
    { timeout: 20_000 },
    async () => {
      const store = new HttpLeaseStore({ url: server.url, batch: false });
      const first = server.streams.length;
      const calls = recorder();
      try {
        const watching = store.watch('jobs/crlf', calls.onChange);
        const s1 = await server.stream(first);
        assert.match(s1.req.url ?? '', /^\/v1\/events\?key=jobs%2Fcrlf$/);
        assert.equal(s1.req.headers['last-event-id'], undefined);
        s1.res.write(
          'retry: 300\r\n\r\nid: 7\r\nevent: ready\r\ndata: {"key":"jobs/crlf"}\r\n\r\n',
        );
        const unwatch = await watching;
        s1.res.write('id: 8\r\nevent: released\r\ndata: {"key":"jobs/crlf","token":"5"}\r\n\r\n');
        assert.equal(await calls.next(), 'freed');
        s1.res.write('id: 9\r\nevent: acquired\r\ndata: {"key":"jobs/crlf","token":"6"}\r\n\r\n');
        assert.equal(await calls.next(), 'granted');
        const droppedAt = performance.now();
        s1.res.end();
        assert.equal(await calls.next(), 'freed', 'a dropped stream wakes the watcher to re-check');
        const s2 = await server.stream(first + 1);
        assert.equal(s2.req.headers['last-event-id'], '9');
        assert.ok(
          s2.at - droppedAt >= 290,
          `reconnected ${Math.round(s2.at - droppedAt)} ms after the drop; retry said 300`,
        );
        s2.res.write('event: ready\r\ndata: {"key":"jobs/crlf"}\r\n\r\n');
        s2.res.write('id: 10\r\nevent: changed\r\ndata: {"key":"jobs/crlf","token":"7"}\r\n\r\n');
        assert.equal(await calls.next(), 'granted', 'a grant relayed from the store');
        s2.res.write('id: 11\r\nevent: changed\r\ndata: {"key":"jobs/crlf"}\r\n\r\n');
        assert.equal(await calls.next(), 'freed');
        unwatch();
      } finally {
        await store.close();
      }
    },
  );

  it(
    'a grant the server did not make itself (straight at its store) reaches a watch through it as granted, its release as freed',
    { timeout: 20_000 },
    async () => {
      const lease = await startTestServer();
      const store = await HttpLeaseStore.connect({ url: lease.url });
      const calls = recorder();
      try {
        const key = uniqueKey('relayed-grant');
        const unwatch = await store.watch(key, calls.onChange);
        const leaseId = randomUUID();
        const opts = { timeoutMs: 5000, signal: new AbortController().signal };
        const r = await lease.store.tryAcquire(
          { key, leaseId, ownerId: 'elsewhere', ttlMs: 30_000, value: undefined },
          opts,
        );
        assert.equal(r.status, 'acquired');
        if (r.status !== 'acquired') return;
        assert.equal(await calls.next(), 'granted');
        assert.equal(
          (await lease.store.release({ key, leaseId, token: r.token }, opts)).status,
          'released',
        );
        assert.equal(await calls.next(), 'freed');
        unwatch();
      } finally {
        await store.close();
        await lease.close();
      }
    },
  );
});
