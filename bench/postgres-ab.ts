// `node build/bench/postgres-ab.js OTHER_BUILD [workers] [rounds] [seconds] [keys]`: this
// build's PostgreSQL store against another build's (OTHER_BUILD = a directory with
// `src/core/client.js` and `src/stores/postgres/store.js`, e.g. main's build), and the seed's
// statements, in interleaved rounds on one machine. Acquire + release cycles, each worker its
// own LeaseClient on one store, as bench/postgres.ts does. Prints each round's rates and the
// medians of the per-round ratios (compare ratios, not absolute rates, on a shared machine).
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { LeaseClient } from '../src/core/client.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import { backendCpuMs, median, SEED_TABLE, seedLoop, type Loop } from './postgres-probes.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const [otherDir, w = '1', r = '5', s = '3', k = 'distinct'] = process.argv.slice(2);
if (otherDir === undefined) throw new Error('usage: postgres-ab.js OTHER_BUILD [workers] …');
const workers = Number(w);
const rounds = Number(r);
const durationMs = Number(s) * 1000;
const keys = k === 'hot' ? 'hot' : 'distinct';
/** Per-round lines are left out with many rounds (`LEASEHOLD_AB_QUIET=1`). */
const quiet = process.env['LEASEHOLD_AB_QUIET'] === '1';

interface StoreModule {
  PostgresLeaseStore: typeof PostgresLeaseStore;
}
interface ClientModule {
  LeaseClient: typeof LeaseClient;
}
const base = pathToFileURL(resolve(otherDir) + '/').href;
const other = (await import(new URL('src/stores/postgres/store.js', base).href)) as StoreModule;
const otherClient = (await import(new URL('src/core/client.js', base).href)) as ClientModule;

const tag = randomBytes(3).toString('hex');
const schemas = { mine: `lh_ab_mine_${tag}`, other: `lh_ab_other_${tag}` };
const seedSchema = `lh_ab_seed_${tag}`;
const seedTable = `"${seedSchema}".coordination_lease`;
const admin = new pg.Client({ connectionString: PG_URL });
await admin.connect();
await admin.query(`CREATE SCHEMA "${seedSchema}"; ${SEED_TABLE(seedTable)}`);

// Each subject's connections carry their own application_name, so that the CPU of their
// backends can be read from /proc (backendCpuMs).
const app = (subject: string): string => `lh-ab-${process.pid}-${subject}`;
const mine = new PostgresLeaseStore({
  connection: { connectionString: PG_URL, application_name: app('mine') },
  schema: schemas.mine,
  maxConnections: workers,
});
const theirs = new other.PostgresLeaseStore({
  connection: { connectionString: PG_URL, application_name: app('other') },
  schema: schemas.other,
  maxConnections: workers,
});
await mine.migrate();
await theirs.migrate();
const mineClients = Array.from(
  { length: workers },
  (_, i) => new LeaseClient({ store: mine, ownerId: `m-${i}` }),
);
const otherClients = Array.from(
  { length: workers },
  (_, i) => new otherClient.LeaseClient({ store: theirs, ownerId: `o-${i}` }),
);
const seedPool = new pg.Pool({
  connectionString: PG_URL,
  max: workers,
  application_name: app('seed'),
});

const leaseLoop =
  (clients: LeaseClient[], prefix: string): Loop =>
  async (wk, until, samples) => {
    const c = clients[wk]!;
    const key = keys === 'hot' ? `${prefix}/hot` : `${prefix}/${wk}`;
    let cycles = 0;
    let attempts = 0;
    while (performance.now() < until) {
      const t = performance.now();
      attempts++;
      const a = await c.acquire(key, { ttl: 10_000 });
      if (a.status !== 'acquired') continue;
      await a.lease.release();
      samples.push(performance.now() - t);
      cycles++;
    }
    return { cycles, attempts };
  };

type Subject = 'mine' | 'other' | 'seed';
const loops: Record<Subject, Loop> = {
  mine: leaseLoop(mineClients, `ab/${tag}/mine`),
  other: leaseLoop(otherClients, `ab/${tag}/other`),
  seed: seedLoop(seedPool, seedTable, `ab/${tag}/seed`, keys),
};

interface Got {
  rate: number;
  p50: number;
  cpuUs: number;
  serverUs: number;
}

async function measure(subject: Subject): Promise<Got> {
  const loop = loops[subject];
  const samples: number[] = [];
  const server0 = await backendCpuMs(admin, app(subject));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const until = t0 + durationMs;
  const done = await Promise.all(
    Array.from({ length: workers }, (_, i) => loop(i, until, samples)),
  );
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cycles = done.reduce((a, d) => a + d.cycles, 0);
  const serverMs = (await backendCpuMs(admin, app(subject))) - server0;
  return {
    rate: (cycles / elapsed) * 1000,
    p50: median(samples),
    cpuUs: (cpu.user + cpu.system) / Math.max(1, cycles),
    serverUs: (serverMs * 1000) / Math.max(1, cycles),
  };
}

const ratios: Record<string, number[]> = { 'mine/seed': [], 'other/seed': [], 'mine/other': [] };
const perCycle: Record<Subject, { client: number[]; server: number[] }> = {
  mine: { client: [], server: [] },
  other: { client: [], server: [] },
  seed: { client: [], server: [] },
};
// Unmeasured warm-up of each subject (JIT, connections, first rows), as bench/postgres.ts.
for (const subject of ['seed', 'mine', 'other'] as Subject[]) {
  await loops[subject](0, performance.now() + 500, []);
}
const order: Subject[] = ['seed', 'mine', 'other'];
for (let round = 0; round < rounds; round++) {
  const got = {} as Record<Subject, Got>;
  // Short rounds, many of them, keep the subjects side by side on a machine whose load
  // changes from second to second (`… 1 40 0.3`).
  for (let i = 0; i < order.length; i++) {
    const subject = order[(i + round) % order.length]!;
    got[subject] = await measure(subject);
    perCycle[subject].client.push(got[subject].cpuUs);
    perCycle[subject].server.push(got[subject].serverUs);
  }
  ratios['mine/seed']!.push(got.mine.rate / got.seed.rate);
  ratios['other/seed']!.push(got.other.rate / got.seed.rate);
  ratios['mine/other']!.push(got.mine.rate / got.other.rate);
  if (!quiet)
    console.log(
      `round ${round + 1}: ` +
        order
          .map(
            (sub) =>
              `${sub} ${Math.round(got[sub].rate)}/s p50 ${got[sub].p50.toFixed(2)} ms client ${Math.round(got[sub].cpuUs)} server ${Math.round(got[sub].serverUs)} µs/cycle`,
          )
          .join(' | '),
    );
}
console.log(
  `${workers} worker(s), ${keys}, ${rounds} rounds of ${durationMs / 1000} s; medians of per-round ratios: ` +
    Object.entries(ratios)
      .map(([n, xs]) => `${n} ${median(xs).toFixed(2)}×`)
      .join(', '),
);
const cpuRatio = (a: Subject, b: Subject, side: 'client' | 'server'): string =>
  median(perCycle[a][side].map((x, i) => x / perCycle[b][side][i]!)).toFixed(2);
console.log(
  `medians of per-round CPU ratios (client / backend): mine/other ${cpuRatio('mine', 'other', 'client')} / ${cpuRatio('mine', 'other', 'server')}, ` +
    `mine/seed ${cpuRatio('mine', 'seed', 'client')} / ${cpuRatio('mine', 'seed', 'server')}, ` +
    `other/seed ${cpuRatio('other', 'seed', 'client')} / ${cpuRatio('other', 'seed', 'server')}`,
);
console.log(
  'medians of CPU per cycle (client / backend, µs): ' +
    order
      .map(
        (sub) =>
          `${sub} ${Math.round(median(perCycle[sub].client))} / ${Math.round(median(perCycle[sub].server))}`,
      )
      .join(', '),
);

await Promise.all([...mineClients, ...otherClients].map((c) => c.close()));
await mine.close();
await theirs.close();
await seedPool.end();
for (const sc of [...Object.values(schemas), seedSchema]) {
  await admin.query(`DROP SCHEMA IF EXISTS "${sc}" CASCADE`);
}
await admin.end();
