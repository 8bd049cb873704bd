// `node build/bench/fence-ab.js OTHER_BUILD [postgres|redis] [rounds] [seconds]`: this build's
// PostgresFence or RedisFence against another build's (OTHER_BUILD = a directory with
// `src/fencing/postgres.js` and `src/fencing/redis.js`, e.g. an older commit's `build/`), in one
// process on the machine's PostgreSQL / Redis, in interleaved rounds (the order alternating).
// One writer per fence, a new token on every write: PostgreSQL writes one row inside the
// fence's transaction (`PostgresFence.write`), Redis one fenced `SET`. Prints each build's
// median writes/s and the median of the per-round ratios: compare ratios, not absolute rates,
// on a shared machine.
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PostgresFence } from '../src/fencing/postgres.js';
import { RedisFence } from '../src/fencing/redis.js';
import { median } from './postgres-probes.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const [otherDir, kind = 'postgres', r = '10', s = '1'] = process.argv.slice(2);
if (otherDir === undefined || (kind !== 'postgres' && kind !== 'redis'))
  throw new Error('usage: fence-ab.js OTHER_BUILD [postgres|redis] [rounds] [seconds]');
const rounds = Number(r);
const sliceMs = Number(s) * 1000;

interface FenceModules {
  PostgresFence: typeof PostgresFence;
  RedisFence: typeof RedisFence;
}
const base = pathToFileURL(resolve(otherDir) + '/').href;
const other: FenceModules = {
  ...((await import(new URL('src/fencing/postgres.js', base).href)) as Pick<
    FenceModules,
    'PostgresFence'
  >),
  ...((await import(new URL('src/fencing/redis.js', base).href)) as Pick<
    FenceModules,
    'RedisFence'
  >),
};
const mine: FenceModules = { PostgresFence, RedisFence };

interface Subject {
  readonly name: string;
  /** One fenced write with `token`. */
  readonly write: (token: bigint) => Promise<void>;
  readonly close: () => Promise<void>;
  token: bigint;
  readonly rates: number[];
}

const tag = randomBytes(3).toString('hex');
const admin = new pg.Client({ connectionString: PG_URL });
const redis = new Redis(REDIS_URL);
const schemas: string[] = [];

async function subject(name: string, m: FenceModules): Promise<Subject> {
  if (kind === 'postgres') {
    const schema = `lh_fence_ab_${name.replace(/\W/g, '')}_${tag}`;
    schemas.push(schema);
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".doc (id int PRIMARY KEY, body text NOT NULL)`);
    await admin.query(`INSERT INTO "${schema}".doc VALUES (1, '')`);
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    const fence = new m.PostgresFence({ pool, schema });
    await fence.migrate();
    return {
      name,
      token: 1n,
      rates: [],
      write: async (token) => {
        const r = await fence.write({ scope: 'doc/1', token }, (tx) =>
          tx.query(`UPDATE "${schema}".doc SET body = $1 WHERE id = 1`, [token.toString()]),
        );
        if (r.status !== 'applied') throw new Error(`${name}: ${r.status}`);
      },
      close: async () => {
        await fence.close();
        await pool.end();
      },
    };
  }
  const prefix = `lh-fence-ab-${name.replace(/\W/g, '')}-${tag}:`;
  const fence = new m.RedisFence({ redis, prefix });
  return {
    name,
    token: 1n,
    rates: [],
    write: async (token) => {
      const r = await fence.set('doc/1', token, `${prefix}doc`, token.toString());
      if (r.status !== 'applied') throw new Error(`${name}: ${r.status}`);
    },
    close: async () => {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
    },
  };
}

async function slice(sub: Subject, ms: number): Promise<number> {
  const end = performance.now() + ms;
  let done = 0;
  while (performance.now() < end) {
    sub.token += 1n;
    await sub.write(sub.token);
    done++;
  }
  return done / (ms / 1000);
}

await admin.connect();
const subjects = [await subject('this build', mine), await subject('other', other)];
try {
  for (const sub of subjects) await slice(sub, Math.min(500, sliceMs));
  for (let round = 0; round < rounds; round++) {
    for (const sub of round % 2 === 0 ? subjects : [...subjects].reverse())
      sub.rates.push(await slice(sub, sliceMs));
  }
  for (const sub of subjects)
    console.log(
      `${sub.name}: ${kind} fence, 1 writer, new token each: median ${median(sub.rates).toFixed(0)} writes/s ` +
        `(rounds ${sub.rates.map((x) => x.toFixed(0)).join('/')})`,
    );
  const [a, b] = subjects as [Subject, Subject];
  console.log(
    `this build / other, median of per-round ratios: ${median(a.rates.map((x, i) => x / b.rates[i]!)).toFixed(3)}`,
  );
} finally {
  for (const sub of subjects) await sub.close();
  for (const schema of schemas) await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  await admin.end();
  redis.disconnect();
}
