import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import replyFrom from '@fastify/reply-from';
import fc from 'fast-check';
import { fastify } from 'fastify';
import { createGateway } from '../../../src/fencing/gateway/index.js';
import { openMarkStore, type MarkStore } from '../../../src/fencing/http/index.js';
import { tempDir } from '../../support/tmp.js';
import {
  CHAOS,
  COMPILED,
  ROUTES,
  SEED,
  cases,
  count,
  describeTally,
  newTally,
  send,
  startNodeUpstream,
  startPythonUpstream,
  violation,
  type Recorder,
  type Tally,
} from './differential.js';
import { matchRequest } from '../../../src/fencing/gateway/routes.js';

/**
 * I13 for the gateway: the scope a request was fenced under is the scope of the URL the
 * upstream's own parser received. 5,000 generated requests per upstream in `npm test`,
 * 100,000 per upstream under LEASEHOLD_CHAOS=1 (LEASEHOLD_FUZZ_SEED replays a run).
 */
const RUNS = CHAOS ? 100_000 : 5_000;
const TIME_LIMIT_MS = CHAOS ? 5_400_000 : 300_000;

/** Marks set before the run: the scopes a stale token tries to reach by a path trick. */
const SEEDED: ReadonlyArray<[string, string]> = [
  ['/reports/july', '500'],
  ['/reports/aug', '500'],
  ['/files/x/july', '500'],
];

/** Runs the property against the fence at `url` in front of `up`; returns the tally. */
async function runDifferential(
  url: string,
  up: Recorder,
  marks: MarkStore,
  runs: number,
): Promise<Tally> {
  for (const [path, token] of SEEDED) {
    const a = await send(url, { method: 'PUT', target: path, tokens: [token], extra: [] });
    assert.equal(a.status, 200, `seeding ${path}: ${a.body}`);
  }
  const tally = newTally();
  const mark = async (scope: string): Promise<bigint> => (await marks.read(scope)).highWaterMark;
  await fc.assert(
    fc.asyncProperty(cases, async (c) => {
      const before = up.receipts.length;
      const a = await send(url, c);
      count(tally, a);
      // The hosts answer `ok`: then exactly one request reached them.
      if (a.status === 200 && a.body === 'ok') await up.waitFor(before + 1);
      const v = await violation(c, up.receipts.slice(before), mark, tally);
      if (v !== undefined) throw new Error(v);
    }),
    {
      numRuns: runs,
      interruptAfterTimeLimit: TIME_LIMIT_MS,
      markInterruptAsFailure: true,
      ...(SEED === undefined ? {} : { seed: Number(SEED) }),
    },
  );
  return tally;
}

async function againstGateway(ctx: TestContext, up: Recorder): Promise<void> {
  const tmp = tempDir('gw-diff');
  const marks = await openMarkStore(`sqlite:${tmp.dir}/marks.db`);
  const gw = await createGateway({
    upstream: up.url,
    routes: ROUTES,
    // The riskiest setting: unmatched mutating requests go through unfenced.
    unmatched: 'forward',
    marks,
    port: 0,
    logLevel: 'silent',
    processMetrics: false,
  });
  try {
    const url = await gw.listen();
    const tally = await runDifferential(url, up, marks, RUNS);
    ctx.diagnostic(describeTally(tally));
    assert.ok(tally.cases >= RUNS, `${tally.cases} cases ran`);
    assert.ok(tally.fencedForwards > RUNS / 50, 'the generator reaches fenced routes');
    assert.ok(tally.refusedByRule.size >= 8, 'the generator reaches most refusal rules');
    // Every request the upstream received belongs to a case (or to the seeding): none slipped
    // through behind a refusal.
    assert.equal(up.receipts.length, SEEDED.length + tally.forwarded);
  } finally {
    await gw.close();
    await marks.close();
    await up.close();
    tmp.remove();
  }
}

/**
 * The regression the test must catch: a proxy that scopes the raw path and forwards the URL
 * as reply-from rebuilds it (what the gateway did before decision 032).
 */
async function naiveProxy(upstream: string, marks: MarkStore) {
  const app = fastify({ routerOptions: { ignoreDuplicateSlashes: false } });
  await app.register(replyFrom, { base: upstream, retryMethods: [] });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
  app.all('/*', async (req, reply) => {
    const path = req.url.split('?')[0] ?? req.url;
    const m = matchRequest(COMPILED, req.method, path, () => undefined);
    if (m.status === 'fenced') {
      const raw = req.headers['fencing-token'];
      if (typeof raw !== 'string' || !/^[1-9][0-9]{0,18}$/.test(raw))
        return reply.code(400).send({ error: { code: 'invalid_argument', message: 'token' } });
      const d = await marks.check({ scope: m.scope, token: BigInt(raw), policy: '>=' });
      if (d.status !== 'applied')
        return reply.code(409).send({ error: { code: 'stale_fence', message: 'stale' } });
    }
    const token = req.headers['fencing-token'];
    return reply.from(req.url, {
      rewriteRequestHeaders: (_r, headers) =>
        typeof token === 'string' ? { ...headers, 'fencing-token': token } : headers,
    });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address() as { port: number };
  return { url: `http://127.0.0.1:${addr.port}`, close: () => app.close() };
}

describe('gateway differential (I13): the scope decided is the scope the upstream received', () => {
  it(`node:http upstream (WHATWG URL view): ${RUNS} generated requests, 0 violations`, async (ctx) => {
    await againstGateway(ctx, await startNodeUpstream());
  });

  it(`Python http.server upstream (another parser, aggressive normalizer): ${RUNS} requests, 0 violations`, async (ctx) => {
    await againstGateway(ctx, await startPythonUpstream());
  });

  it('catches the planted regression: a proxy that scopes the raw path and forwards the rebuilt URL', async (ctx) => {
    const tmp = tempDir('gw-diff-naive');
    const marks = await openMarkStore(`sqlite:${tmp.dir}/marks.db`);
    const up = await startNodeUpstream();
    const proxy = await naiveProxy(up.url, marks);
    try {
      let failure: unknown;
      try {
        await runDifferential(proxy.url, up, marks, 5_000);
      } catch (err) {
        failure = err;
      }
      assert.ok(
        failure instanceof Error,
        'the differential test found no violation in the naive proxy',
      );
      const why = `${failure.message}\n${String((failure as { cause?: unknown }).cause)}`;
      const line = /[A-Z]+ "[^\n]*(?:reached the host as|was forwarded as) [^\n]*/.exec(why)?.[0];
      assert.ok(line !== undefined, why.slice(0, 800));
      ctx.diagnostic(`planted regression caught: ${line}`);
    } finally {
      await proxy.close();
      await up.close();
      await marks.close();
      tmp.remove();
    }
  });
});
