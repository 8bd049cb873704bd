import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { fastify } from 'fastify';
import { createFenceMiddleware, fencingPlugin } from '../../../src/fencing/http/index.js';
import { MAX_STORED_ANSWER_BYTES } from '../../../src/fencing/marks/mark-store.js';
import { MARK_BACKENDS } from './marks-env.js';

interface Answer {
  status: number;
  text: string;
  replayed: string | null;
  location: string | null;
  type: string | null;
}

const put = async (url: string, headers: Record<string, string>): Promise<Answer> => {
  const r = await fetch(url, { method: 'PUT', headers, body: 'x' });
  return {
    status: r.status,
    text: await r.text(),
    replayed: r.headers.get('idempotent-replayed'),
    location: r.headers.get('location'),
    type: r.headers.get('content-type'),
  };
};

/** What the handler answers for call `n`: a big body for paths ending in /big. */
function bodyFor(path: string, n: number): string {
  return path.endsWith('/big') ? 'z'.repeat(MAX_STORED_ANSWER_BYTES + 1) : `made ${n}`;
}

/** The same service twice: node:http with the connect-style middleware, and Fastify with the plugin. */
const SERVICES: readonly {
  name: string;
  start: (
    marks: Parameters<typeof createFenceMiddleware>[0]['marks'],
    calls: { n: number },
  ) => Promise<{ url: string; close: () => Promise<void> }>;
}[] = [
  {
    name: 'connect-style middleware',
    start: async (marks, calls) => {
      const mw = createFenceMiddleware({
        marks,
        scope: (req: IncomingMessage) => (req.url?.startsWith('/r/') ? 'report/1' : undefined),
      });
      const server = createServer((req, res: ServerResponse) =>
        mw(req, res, () => {
          calls.n++;
          res.statusCode = 201;
          res.setHeader('content-type', 'text/plain; charset=utf-8');
          res.setHeader('location', `/made/${calls.n}`);
          res.setHeader('x-request-only', 'not replayed');
          // Written in two parts: the kept answer is the whole body.
          const body = bodyFor(req.url ?? '', calls.n);
          res.write(body.slice(0, 3));
          res.end(body.slice(3));
        }),
      );
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise<void>((r) => server.close(() => r())),
      };
    },
  },
  {
    name: 'Fastify plugin',
    start: async (marks, calls) => {
      const app = fastify();
      await app.register(fencingPlugin, { marks, scope: () => 'report/1' });
      app.put('/r/:id', (req, reply) => {
        calls.n++;
        return reply
          .code(201)
          .type('text/plain; charset=utf-8')
          .header('location', `/made/${calls.n}`)
          .header('x-request-only', 'not replayed')
          .send(bodyFor(req.url, calls.n));
      });
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      return { url, close: () => app.close() };
    },
  },
];

for (const backend of MARK_BACKENDS) {
  for (const service of SERVICES) {
    describe(`${service.name}: a retried idempotency key replays the answer (${backend.name} marks)`, () => {
      it(
        'replays status, the headers that matter and the body; the handler runs once per key',
        { timeout: 30_000 },
        async () => {
          const { marks, dispose } = await backend.open();
          const calls = { n: 0 };
          const svc = await service.start(marks, calls);
          try {
            const u = `${svc.url}/r/1`;
            const first = await put(u, { 'fencing-token': '42', 'idempotency-key': 'k1' });
            assert.equal(first.status, 201);
            assert.equal(first.text, 'made 1');
            assert.equal(first.replayed, null);
            const again = await put(u, { 'fencing-token': '42', 'idempotency-key': 'k1' });
            assert.equal(calls.n, 1, 'the handler did not run again');
            assert.equal(again.status, 201);
            assert.equal(again.text, 'made 1', 'the original body');
            assert.equal(again.location, '/made/1', 'the original Location');
            assert.equal(again.type, 'text/plain; charset=utf-8');
            assert.equal(again.replayed, 'true');
            // Another key is another operation; the same key under a newer token too.
            assert.equal(
              (await put(u, { 'fencing-token': '42', 'idempotency-key': 'k2' })).text,
              'made 2',
            );
            assert.equal(
              (await put(u, { 'fencing-token': '43', 'idempotency-key': 'k1' })).text,
              'made 3',
            );
            assert.equal(calls.n, 3);
            // And the old generation is now stale: a new key under it does not run.
            const old = await put(u, { 'fencing-token': '42', 'idempotency-key': 'k3' });
            assert.equal(old.status, 409);
            assert.match(old.text, /"code":"stale_fence"/);
            assert.equal(calls.n, 3);
          } finally {
            await svc.close();
            await dispose();
          }
        },
      );

      it(
        `an answer above ${MAX_STORED_ANSWER_BYTES} bytes is not kept: its retry answers duplicate and does not run`,
        { timeout: 30_000 },
        async () => {
          const { marks, dispose } = await backend.open();
          const calls = { n: 0 };
          const svc = await service.start(marks, calls);
          try {
            const u = `${svc.url}/r/big`;
            const first = await put(u, { 'fencing-token': '7', 'idempotency-key': 'big' });
            assert.equal(first.status, 201);
            assert.equal(first.text.length, MAX_STORED_ANSWER_BYTES + 1);
            const again = await put(u, { 'fencing-token': '7', 'idempotency-key': 'big' });
            assert.equal(again.status, 409);
            const err = (JSON.parse(again.text) as { error: { code: string; message: string } })
              .error;
            assert.equal(err.code, 'duplicate');
            assert.match(err.message, /answered 201.*too large to keep/);
            assert.equal(calls.n, 1);
          } finally {
            await svc.close();
            await dispose();
          }
        },
      );
    });
  }
}
