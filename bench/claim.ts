// `npm run bench -- --only claim`: what claim before start costs an acquisition. Each cycle
// acquires a key and releases it, without fences (the baseline, `raw: …`) and with `fences:
// [one fence]`, so the acquisition also installs its token at that fence (one round trip and
// one committed mark write there) before the lease is handed over. SQLite: a SQLite lease
// store and a SqliteFence, files on the same disk. PostgreSQL: a PostgresLeaseStore and a
// PostgresFence, on the same server.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { LeaseClient } from '../src/core/client.js';
import type { FenceClaim } from '../src/core/fence-claim.js';
import type { LeaseStore } from '../src/core/store.js';
import { PostgresFence } from '../src/fencing/postgres.js';
import { SqliteFence } from '../src/fencing/sqlite.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { measureCycles, type BenchOptions, type BenchResult } from './lib.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Rounds of (without, with) measured alternately, so load drifts hit both alike. */
const ROUNDS = 3;

async function compare(
  suite: string,
  store: LeaseStore,
  fence: FenceClaim['fence'],
  opts: BenchOptions,
): Promise<BenchResult[]> {
  const out: BenchResult[] = [];
  const client = new LeaseClient({ store, ownerId: `bench-claim-${suite}` });
  const run = randomUUID().slice(0, 8);
  for (const workers of opts.quick ? [1] : [1, 8]) {
    const slice = Math.max(50, Math.floor(opts.durationMs / ROUNDS));
    const runs = {
      raw: [] as Awaited<ReturnType<typeof measureCycles>>[],
      claim: [] as Awaited<ReturnType<typeof measureCycles>>[],
    };
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of ['raw', 'claim'] as const) {
        runs[kind].push(
          await measureCycles(workers, slice, async (w) => {
            const key = `bench/claim/${run}/${kind}/${w}`;
            const r = await client.acquire(key, {
              ttl: 30_000,
              wait: 30_000,
              ...(kind === 'claim' ? { fences: [{ fence }] } : {}),
            });
            if (r.status !== 'acquired') throw new Error(`bench claim acquire: ${r.status}`);
            await r.lease.release();
          }),
        );
      }
    }
    const median = (xs: number[]): number =>
      [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ratios = runs.claim.map((c, i) => c.cyclesPerSec / runs.raw[i]!.cyclesPerSec);
    for (const kind of ['raw', 'claim'] as const) {
      const m = runs[kind];
      out.push({
        suite: 'claim',
        subject:
          kind === 'raw'
            ? `raw: ${suite} acquire, no fences`
            : `${suite} acquire, fences: [${suite} fence]`,
        scenario: `${suite} cycle`,
        workers,
        keys: 'distinct',
        cyclesPerSec: median(m.map((x) => x.cyclesPerSec)),
        p50Ms: median(m.map((x) => x.p50Ms)),
        p99Ms: median(m.map((x) => x.p99Ms)),
        cpuMsPer1000: median(m.map((x) => x.cpuMsPer1000)),
        ...(kind === 'claim' ? { ratioToRaw: median(ratios) } : {}),
        notes: `median of ${ROUNDS} alternating rounds`,
      });
    }
    console.error(
      `bench: claim ${suite} ${workers}w: with a claim ${median(ratios).toFixed(2)}x the cycles/s without`,
    );
  }
  await client.close();
  return out;
}

export async function claimBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'lh-bench-claim-'));
  try {
    const store = new SqliteLeaseStore({ path: join(dir, 'leases.db') });
    const fence = new SqliteFence({ path: join(dir, 'fence.db') });
    try {
      results.push(...(await compare('sqlite', store, fence, opts)));
    } finally {
      fence.close();
      await store.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const schema = `lh_bench_claim_${randomBytes(3).toString('hex')}`;
  const store = new PostgresLeaseStore({ connection: { connectionString: PG_URL }, schema });
  await store.migrate();
  const fence = new PostgresFence({ connectionString: PG_URL, schema });
  try {
    results.push(...(await compare('postgres', store, fence, opts)));
  } finally {
    await fence.close();
    await store.close();
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
  return results;
}
