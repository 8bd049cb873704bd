// The fencing gateway against calling the upstream directly and against a plain reverse proxy
// made of the same library (@fastify/reply-from over an undici pool) without fencing. One
// process holds the clients, the proxies and the upstream (a node:http server answering at
// once), so the figures compare the proxies' own costs on this machine; at 32 clients it is
// saturated, and p50 is then about 32 / throughput. bench/gateway-processes.ts adds the rows
// with each proxy in its own process and at a fixed load below saturation.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import replyFrom from '@fastify/reply-from';
import { fastify } from 'fastify';
import { Pool } from 'undici';
import { createGateway } from '../src/fencing/gateway/index.js';
import { tempDir } from '../test/support/tmp.js';
import { gatewayProcessBenchmarks } from './gateway-processes.js';
import { measureCycles, type BenchOptions, type BenchResult } from './lib.js';

type Measured = Awaited<ReturnType<typeof measureCycles>>;

function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** The gateway suite: requests/s and latency, 1 and 32 clients, same token vs a new token each time. */
export async function gatewayBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const upUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

  const plain = fastify();
  plain.removeAllContentTypeParsers();
  plain.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
  await plain.register(replyFrom, { base: upUrl, undici: { connections: 128 } });
  plain.all('/*', (req, reply) => reply.from(req.url));
  const plainUrl = await plain.listen({ port: 0, host: '127.0.0.1' });

  const tmp = tempDir('bench-gw');
  const gw = await createGateway({
    upstream: upUrl,
    routes: [{ methods: ['PUT'], path: '/items/:id', scope: 'item/{id}' }],
    marks: `sqlite:${tmp.dir}/marks.db`,
    port: 0,
    logLevel: 'silent',
    processMetrics: false,
  });
  const gwUrl = await gw.listen();

  const results: BenchResult[] = [];
  // The machine may be shared: the three subjects are measured in interleaved rounds (the
  // order rotating each round), and each ratio is the median of the per-round ratios to the
  // plain proxy measured in the same round.
  const rounds = opts.quick ? 1 : 5;
  const sliceMs = Math.max(300, Math.floor(opts.durationMs / rounds));
  try {
    for (const scenario of ['same token', 'new token each'] as const) {
      for (const workers of [1, 32]) {
        const subjects = (
          [
            ['raw reply-from proxy', plainUrl],
            ['upstream directly', upUrl],
            ['leasehold gateway', gwUrl],
          ] as const
        ).map(([subject, base]) => {
          const pool = new Pool(base, { connections: workers });
          const tokens = Array.from({ length: workers }, () => 1n);
          const run = (ms: number) =>
            measureCycles(workers, ms, async (w) => {
              if (scenario === 'new token each') tokens[w]! += 1n;
              const r = await pool.request({
                method: 'PUT',
                // Each client its own scope: the queue serialises one scope, not the gateway.
                path: `/items/${scenario.length}-${workers}-${w}`,
                headers: { 'fencing-token': tokens[w]!.toString() },
                body: 'x',
              });
              await r.body.dump();
              if (r.statusCode !== 200) throw new Error(`${subject} answered ${r.statusCode}`);
            });
          return { subject, pool, run, runs: [] as Measured[] };
        });
        for (const s of subjects) await s.run(Math.min(300, opts.durationMs / 4));
        for (let round = 0; round < rounds; round++) {
          const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
          for (const s of order) s.runs.push(await s.run(sliceMs));
        }
        const raw = subjects[0]!;
        for (const s of subjects) {
          await s.pool.close();
          const median = [...s.runs].sort((x, y) => x.cyclesPerSec - y.cyclesPerSec)[
            Math.floor(s.runs.length / 2)
          ]!;
          const perRound = (f: (m: Measured) => number): number =>
            medianOf(s.runs.map((m, i) => f(m) / f(raw.runs[i]!)));
          const addedP50 = medianOf(s.runs.map((m, i) => m.p50Ms - raw.runs[i]!.p50Ms));
          results.push({
            suite: 'gateway',
            subject: s.subject,
            scenario: `PUT, ${scenario}`,
            workers,
            keys: 'distinct',
            cyclesPerSec: median.cyclesPerSec,
            p50Ms: median.p50Ms,
            p99Ms: median.p99Ms,
            cpuMsPer1000: median.cpuMsPer1000,
            ...(s === raw
              ? {}
              : {
                  ratioToRaw: perRound((m) => m.cyclesPerSec),
                  cpuRatioToRaw: perRound((m) => m.cpuMsPer1000),
                }),
            notes:
              `median of ${rounds} interleaved rounds (cycles/s ${s.runs.map((m) => Math.round(m.cyclesPerSec)).join('/')})` +
              (s === raw
                ? ''
                : `; p50 over the plain proxy, median per round: ${addedP50.toFixed(3)} ms`),
          });
        }
      }
    }
  } finally {
    await gw.close();
    await plain.close();
    await new Promise((r) => upstream.close(r));
    tmp.remove();
  }
  // The same comparison with each proxy in its own process, and at a load below saturation.
  results.push(...(await gatewayProcessBenchmarks(opts)));
  return results;
}
