// `node build/bench/gateway-ab.js OTHER_BUILD [same|new] [rounds] [seconds] [clients]`: this
// build's gateway against another build's (OTHER_BUILD = a directory with
// `src/fencing/gateway/index.js`, e.g. an older commit's `build/`), both with SQLite marks in
// one process behind one upstream, in interleaved rounds (the order alternating). `same`
// sends one token again and again (the mark is read, not written); `new` raises the token on
// every request (every request writes and syncs the mark). Prints each build's median rate
// and client-side CPU per request and the median of the per-round ratios: compare ratios,
// not absolute rates, on a shared machine.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { createGateway } from '../src/fencing/gateway/index.js';
import { median } from './postgres-probes.js';

const [otherDir, scenario = 'new', r = '10', s = '1', c = '1'] = process.argv.slice(2);
if (otherDir === undefined || (scenario !== 'same' && scenario !== 'new'))
  throw new Error('usage: gateway-ab.js OTHER_BUILD [same|new] [rounds] [seconds] [clients]');
const rounds = Number(r);
const sliceMs = Number(s) * 1000;
const clients = Number(c);

interface GatewayModule {
  createGateway: typeof createGateway;
}
const base = pathToFileURL(resolve(otherDir) + '/').href;
const other = (await import(new URL('src/fencing/gateway/index.js', base).href)) as GatewayModule;

const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
});
await new Promise<void>((done) => upstream.listen(0, '127.0.0.1', done));
const upUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

interface Subject {
  readonly name: string;
  readonly close: () => Promise<void>;
  readonly pool: Pool;
  readonly tokens: bigint[];
  readonly rates: number[];
  readonly cpuUs: number[];
}
const dirs: string[] = [];
async function subject(name: string, make: typeof createGateway): Promise<Subject> {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-ab-'));
  dirs.push(dir);
  const gw = await make({
    upstream: upUrl,
    routes: [{ methods: ['PUT'], path: '/items/:id', scope: 'item/{id}' }],
    marks: `sqlite:${dir}/marks.db`,
    port: 0,
    logLevel: 'silent',
    processMetrics: false,
  });
  const url = await gw.listen();
  return {
    name,
    close: () => gw.close(),
    pool: new Pool(url, { connections: clients }),
    tokens: Array.from({ length: clients }, () => 1n),
    rates: [],
    cpuUs: [],
  };
}

/** One slice of `clients` closed loops, each on its own scope; answers other than 200 throw. */
async function slice(sub: Subject, ms: number): Promise<{ rate: number; cpuUs: number }> {
  const end = performance.now() + ms;
  let done = 0;
  const cpu0 = process.cpuUsage();
  await Promise.all(
    sub.tokens.map(async (_, w) => {
      while (performance.now() < end) {
        if (scenario === 'new') sub.tokens[w]! += 1n;
        const res = await sub.pool.request({
          method: 'PUT',
          path: `/items/ab-${w}`,
          headers: { 'fencing-token': sub.tokens[w]!.toString() },
          body: 'x',
        });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(`${sub.name} answered ${res.statusCode}`);
        done++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { rate: done / (ms / 1000), cpuUs: (cpu.user + cpu.system) / done };
}

const subjects = [
  await subject('this build', createGateway),
  await subject('other', other.createGateway),
];
try {
  for (const sub of subjects) await slice(sub, Math.min(500, sliceMs));
  for (let round = 0; round < rounds; round++) {
    for (const sub of round % 2 === 0 ? subjects : [...subjects].reverse()) {
      const m = await slice(sub, sliceMs);
      sub.rates.push(m.rate);
      sub.cpuUs.push(m.cpuUs);
    }
  }
  for (const sub of subjects)
    console.log(
      `${sub.name}: ${scenario} token, ${clients} client(s): median ${median(sub.rates).toFixed(0)} req/s, ` +
        `${median(sub.cpuUs).toFixed(0)} µs CPU per request (rounds ${sub.rates.map((x) => x.toFixed(0)).join('/')})`,
    );
  const [mine, theirs] = subjects as [Subject, Subject];
  const ratios = mine.rates.map((x, i) => x / theirs.rates[i]!);
  console.log(`this build / other, median of per-round ratios: ${median(ratios).toFixed(3)}`);
} finally {
  for (const sub of subjects) {
    await sub.pool.close();
    await sub.close();
  }
  await new Promise((done) => upstream.close(done));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
