import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import express from 'express';
import fc from 'fast-check';
import { fastify } from 'fastify';
import {
  createFenceMiddleware,
  fencingPlugin,
  HttpFence,
  openMarkStore,
  type MarkStore,
} from '../../../src/fencing/http/index.js';
import { compileRoute } from '../../../src/fencing/gateway/routes.js';
import { tempDir } from '../../support/tmp.js';
import {
  CHAOS,
  SEED,
  cases,
  count,
  describeTally,
  newTally,
  send,
  violation,
  whatwgView,
  type Receipt,
} from './differential.js';

/**
 * I13 for `leasehold/fencing/http`: mounted in Fastify, Express and a bare node:http server,
 * the scope the middleware fenced a request under is the scope of what the handler acts on.
 * The bare server's scope function reads the raw `req.url` while its handler reads the WHATWG
 * URL: only the middleware's refusal of non-canonical targets keeps the two the same.
 */
/** The one route every host fences (the hosts serve no /files). */
const REPORTS = [compileRoute({ path: '/reports/:id', scope: 'report/{id}' }, 'routes[0]')];

const RUNS = CHAOS ? 50_000 : 2_000;
const TIME_LIMIT_MS = CHAOS ? 3_600_000 : 240_000;

interface Host {
  readonly url: string;
  readonly receipts: Receipt[];
  close(): Promise<void>;
}

const idOf = (req: { params?: unknown }): string | undefined =>
  (req.params as { id?: string } | undefined)?.id;

function record(receipts: Receipt[], req: IncomingMessage, view: string): void {
  const token = req.headers['fencing-token'];
  receipts.push({
    method: req.method ?? '',
    raw: req.url ?? '',
    view,
    token: Array.isArray(token) ? token.join(',') : token,
  });
}

async function listen(server: ReturnType<typeof createServer>): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function fastifyHost(marks: MarkStore): Promise<Host> {
  const receipts: Receipt[] = [];
  const app = fastify();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  await app.register(fencingPlugin, {
    marks,
    scope: (req) => (idOf(req) === undefined ? undefined : `report/${idOf(req)}`),
  });
  app.route({
    method: ['PUT', 'POST', 'DELETE', 'PATCH', 'GET'],
    url: '/reports/:id',
    handler: (req) => {
      record(receipts, req.raw, `/reports/${encodeURIComponent(idOf(req) ?? '')}`);
      return 'ok';
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, receipts, close: () => app.close() };
}

async function expressHost(marks: MarkStore): Promise<Host> {
  const receipts: Receipt[] = [];
  const app = express();
  const fence = createFenceMiddleware<express.Request>({
    marks,
    scope: (req) => (idOf(req) === undefined ? undefined : `report/${idOf(req)}`),
  });
  app.all('/reports/:id', fence, (req, res) => {
    record(receipts, req, `/reports/${encodeURIComponent(idOf(req) ?? '')}`);
    res.end('ok');
  });
  // Express's own answer to a path it cannot decode, without its stack trace on stderr.
  app.use(
    (_err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(400).end('bad');
    },
  );
  const server = createServer(app);
  const url = await listen(server);
  return { url, receipts, close: () => closeServer(server) };
}

/** The scope a careless service takes from the raw target. */
function naiveScope(req: IncomingMessage): string | undefined {
  const m = /^\/reports\/([^/?]+)\/?(?:\?|$)/.exec(req.url ?? '');
  return m?.[1] === undefined ? undefined : `report/${decodeURIComponent(m[1])}`;
}

function closeServer(server: ReturnType<typeof createServer>): Promise<void> {
  server.closeAllConnections();
  return new Promise((r) => server.close(() => r()));
}

async function nodeHost(marks: MarkStore): Promise<Host> {
  const receipts: Receipt[] = [];
  const fence = createFenceMiddleware({ marks, scope: naiveScope });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    fence(req, res, (err?: unknown) => {
      if (err !== undefined) {
        res.statusCode = 400;
        return void res.end('bad');
      }
      // The handler acts on the path as WHATWG URL reads it.
      record(receipts, req, whatwgView(req.url ?? ''));
      req.resume();
      res.end('ok');
    });
  });
  const url = await listen(server);
  return { url, receipts, close: () => closeServer(server) };
}

/** The regression: the same bare host deciding through `HttpFence` without the target check. */
async function uncheckedNodeHost(marks: MarkStore): Promise<Host> {
  const receipts: Receipt[] = [];
  const fence = new HttpFence({ marks });
  const server = createServer((req, res) => {
    void (async () => {
      let scope: string | undefined;
      try {
        scope = req.method === 'GET' ? undefined : naiveScope(req);
      } catch {
        res.statusCode = 400;
        return void res.end('bad');
      }
      const entry = scope === undefined ? undefined : await fence.enter(scope, req.headers);
      if (entry !== undefined && entry.status !== 'pass') {
        res.statusCode = entry.status === 'refused' ? entry.httpStatus : 409;
        return void res.end('refused');
      }
      record(receipts, req, whatwgView(req.url ?? ''));
      req.resume();
      res.end('ok', () => entry?.done(200));
    })();
  });
  const url = await listen(server);
  return { url, receipts, close: () => closeServer(server) };
}

async function runAgainst(
  ctx: TestContext | undefined,
  start: (marks: MarkStore) => Promise<Host>,
  runs: number,
): Promise<void> {
  const tmp = tempDir('mw-diff');
  const marks = await openMarkStore(`sqlite:${tmp.dir}/marks.db`);
  const host = await start(marks);
  const tally = newTally();
  const mark = async (scope: string): Promise<bigint> => (await marks.read(scope)).highWaterMark;
  try {
    const seeded = await send(host.url, {
      method: 'PUT',
      target: '/reports/july',
      tokens: ['500'],
      extra: [],
    });
    assert.equal(seeded.status, 200, seeded.body);
    const base = host.receipts.length;
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const before = host.receipts.length;
        const a = await send(host.url, c);
        count(tally, a);
        const v = await violation(c, host.receipts.slice(before), mark, tally, REPORTS);
        if (v !== undefined) throw new Error(v);
      }),
      {
        numRuns: runs,
        interruptAfterTimeLimit: TIME_LIMIT_MS,
        markInterruptAsFailure: true,
        ...(SEED === undefined ? {} : { seed: Number(SEED) }),
      },
    );
    ctx?.diagnostic(describeTally(tally));
    assert.ok(tally.cases >= runs);
    assert.ok(tally.fencedForwards > runs / 50, 'the generator reaches the fenced handler');
    assert.equal(host.receipts.length, base + tally.forwarded);
  } finally {
    await host.close();
    await marks.close();
    tmp.remove();
  }
}

describe('middleware differential (I13): the scope fenced is the scope the handler acts on', () => {
  it(`Fastify plugin: ${RUNS} generated requests, 0 violations`, (ctx) =>
    runAgainst(ctx, fastifyHost, RUNS));
  it(`Express route middleware: ${RUNS} generated requests, 0 violations`, (ctx) =>
    runAgainst(ctx, expressHost, RUNS));
  it(`node:http with a raw-target scope function: ${RUNS} generated requests, 0 violations`, (ctx) =>
    runAgainst(ctx, nodeHost, RUNS));

  it('catches the planted regression: the same host without the target check', async (ctx) => {
    let failure: unknown;
    try {
      await runAgainst(undefined, uncheckedNodeHost, 5_000);
    } catch (err) {
      failure = err;
    }
    assert.ok(failure instanceof Error, 'no violation found without the target check');
    const why = `${failure.message}\n${String((failure as { cause?: unknown }).cause)}`;
    const line = /[A-Z]+ "[^\n]*reached the host as [^\n]*/.exec(why)?.[0];
    assert.ok(line !== undefined, why.slice(0, 800));
    ctx.diagnostic(`planted regression caught: ${line}`);
  });
});
