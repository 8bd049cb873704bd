import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { LeaseClient } from '../src/core/client.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import type { BenchOptions, BenchResult } from './lib.js';
import {
  backendCpuMs,
  combine,
  median,
  round2,
  sampleWaits,
  SEED_TABLE,
  seedLoop,
  type Loop,
} from './postgres-probes.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const SUITE = 'postgres';

export interface Measured {
  cycles: number;
  attempts: number;
  elapsedMs: number;
  cpuMs: number;
  samples: number[];
}

/** Runs `workers` loops until the deadline; each loop returns true for a completed cycle. */
async function measure(
  workers: number,
  durationMs: number,
  loop: (
    worker: number,
    until: number,
    samples: number[],
  ) => Promise<{ cycles: number; attempts: number }>,
): Promise<Measured> {
  const samples: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const until = t0 + durationMs;
  const done = await Promise.all(
    Array.from({ length: workers }, (_, w) => loop(w, until, samples)),
  );
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    cycles: done.reduce((a, d) => a + d.cycles, 0),
    attempts: done.reduce((a, d) => a + d.attempts, 0),
    elapsedMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    samples,
  };
}

function percentile(sorted: number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function row(
  subject: string,
  scenario: string,
  workers: number,
  keys: BenchResult['keys'],
  m: Measured,
  notes?: string,
): BenchResult {
  const sorted = [...m.samples].sort((a, b) => a - b);
  const p50 = percentile(sorted, 50);
  const p99 = percentile(sorted, 99);
  const busy = m.attempts > m.cycles ? `${m.attempts - m.cycles} busy answers` : undefined;
  const note = [notes, busy].filter(Boolean).join('; ');
  return {
    suite: SUITE,
    subject,
    scenario,
    workers,
    keys,
    cyclesPerSec: Math.round((m.cycles / m.elapsedMs) * 1000),
    ...(p50 !== undefined ? { p50Ms: round(p50) } : {}),
    ...(p99 !== undefined ? { p99Ms: round(p99) } : {}),
    ...(m.cycles > 0 ? { cpuMsPer1000: round((m.cpuMs / m.cycles) * 1000) } : {}),
    ...(note ? { notes: note } : {}),
  };
}

const round = (x: number): number => Math.round(x * 100) / 100;

/** How long each subject runs unmeasured before the measured rounds of a worker count. */
const WARM_UP_MS = 500;

/** Subjects measured round by round against the seed's statements (interleaved). */
type Subject = 'seed' | 'leasehold' | 'seed-async';
const SUBJECT_NAME: Record<Subject, string> = {
  seed: 'raw SQL upsert + release',
  leasehold: 'leasehold',
  'seed-async': 'SQL statements, synchronous_commit=off',
};

/**
 * leasehold's PostgreSQL store against the peers a Postgres user would pick instead, in the
 * same run: the seed's two statements (§4) with the same durable commits (the baseline), the
 * same with `synchronous_commit = off`, and session-level advisory locks. leasehold and the
 * two seed rows are measured in interleaved rounds; leasehold's ratio to each is the median of
 * the per-round ratios. Scenarios: acquire+release cycles at 1 and 32 workers on distinct keys
 * and on one hot key (each worker its own LeaseClient, no waiting), a hot key with `wait` on
 * one shared client, and handoff latency. Server CPU is read from /proc for the backends of
 * each subject's connections; during the 32-worker distinct-key rounds pg_stat_activity is
 * sampled for what the backends wait on. The summary goes to stderr.
 */
export async function postgresBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const schema = `lh_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  // The seed's statements run on a table of the seed's own shape (no leasehold triggers).
  const table = `"${schema}_seed".coordination_lease`;
  const duration = opts.durationMs;
  const rounds = opts.quick ? 1 : 3;
  const workerCounts = [1, 32];
  const handoffWaiters = opts.quick ? 4 : 8;
  const results: BenchResult[] = [];
  const prefix = `bench/${randomBytes(3).toString('hex')}`;
  const summary: string[] = [];

  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA "${schema}_seed"; ${SEED_TABLE(table)}`);
    for (const workers of workerCounts) {
      const app = (s: Subject): string => `lh-bench-${process.pid}-${s}-${workers}`;
      const store = new PostgresLeaseStore({
        connection: { connectionString: PG_URL, application_name: app('leasehold') },
        schema,
        maxConnections: workers,
      });
      await store.migrate();
      const clients = Array.from(
        { length: workers },
        (_, i) => new LeaseClient({ store, ownerId: `bench-${i}` }),
      );
      const seedPool = new pg.Pool({
        connectionString: PG_URL,
        max: workers,
        application_name: app('seed'),
      });
      const asyncPool = new pg.Pool({
        connectionString: PG_URL,
        max: workers,
        application_name: app('seed-async'),
        options: '-c synchronous_commit=off',
      });
      const loops: Record<Subject, (keys: 'distinct' | 'hot') => Loop> = {
        leasehold: (keys) => async (w, until, samples) => {
          const c = clients[w]!;
          const key = keys === 'hot' ? `${prefix}/hot-lh` : `${prefix}/lh-${w}`;
          let cycles = 0;
          let attempts = 0;
          while (performance.now() < until) {
            const t = performance.now();
            attempts++;
            const r = await c.acquire(key, { ttl: 10_000 });
            if (r.status !== 'acquired') continue;
            await r.lease.release();
            samples.push(performance.now() - t);
            cycles++;
          }
          return { cycles, attempts };
        },
        seed: (keys) =>
          seedLoop(seedPool, table, keys === 'hot' ? `${prefix}/hot-raw` : `${prefix}/raw`, keys),
        'seed-async': (keys) =>
          seedLoop(
            asyncPool,
            table,
            keys === 'hot' ? `${prefix}/hot-async` : `${prefix}/async`,
            keys,
          ),
      };
      try {
        // Unmeasured warm-up of every subject (JIT, connections, the table's first rows): the
        // first measured round otherwise charges leasehold's larger client code its compile
        // time (at 1 worker the first row read 0.64× while the identical hot row, measured
        // later, read 1.04×).
        for (const subject of ['seed', 'leasehold', 'seed-async'] as Subject[]) {
          await measure(workers, WARM_UP_MS, loops[subject]('distinct'));
        }
        for (const keys of ['distinct', 'hot'] as const) {
          const per: Record<Subject, Measured[]> = { seed: [], leasehold: [], 'seed-async': [] };
          const cpu: Record<Subject, number> = { seed: 0, leasehold: 0, 'seed-async': 0 };
          const waits: Record<Subject, Map<string, number>> = {
            seed: new Map(),
            leasehold: new Map(),
            'seed-async': new Map(),
          };
          let samplesTaken: Record<Subject, number> = { seed: 0, leasehold: 0, 'seed-async': 0 };
          for (let round = 0; round < rounds; round++) {
            const order: Subject[] = (['seed', 'leasehold', 'seed-async'] as Subject[]).map(
              (_, i, all) => all[(i + round) % all.length]!,
            );
            for (const subject of order) {
              const cpu0 = await backendCpuMs(admin, app(subject));
              const sampling =
                workers > 1 && keys === 'distinct'
                  ? sampleWaits(admin, app(subject), duration, waits[subject])
                  : Promise.resolve(0);
              per[subject].push(await measure(workers, duration, loops[subject](keys)));
              samplesTaken[subject] += await sampling;
              cpu[subject] += (await backendCpuMs(admin, app(subject))) - cpu0;
            }
          }
          const ratio = (s: Subject): number =>
            median(
              per.leasehold.map(
                (m, i) => m.cycles / m.elapsedMs / (per[s][i]!.cycles / per[s][i]!.elapsedMs),
              ),
            );
          for (const subject of ['leasehold', 'seed', 'seed-async'] as Subject[]) {
            const m = combine(per[subject]);
            const r = row(
              SUBJECT_NAME[subject],
              'cycle',
              workers,
              keys,
              m,
              subject === 'seed' ? 'busy answers lock the row and take an xid' : undefined,
            );
            results.push({
              ...r,
              ...(m.cycles > 0
                ? { serverCpuMsPer1000: round2((cpu[subject] / m.cycles) * 1000) }
                : {}),
              ...(subject === 'leasehold' ? { ratioToRaw: round2(ratio('seed')) } : {}),
            });
          }
          summary.push(
            `${workers}w ${keys}: leasehold ${ratio('seed').toFixed(2)}× the plain SQL statements, ` +
              `${ratio('seed-async').toFixed(2)}× them with synchronous_commit=off ` +
              `(median of ${rounds} interleaved rounds)`,
          );
          for (const subject of ['leasehold', 'seed'] as Subject[]) {
            if (samplesTaken[subject] === 0) continue;
            const seen = [...waits[subject]].sort((x, y) => y[1] - x[1]);
            summary.push(
              `  waits, ${subject}, ${workers}w ${keys}, mean backends per sample over ${samplesTaken[subject]}: ` +
                (seen
                  .map(([w, n]) => `${w} ${(n / samplesTaken[subject]).toFixed(1)}`)
                  .join(', ') || 'none'),
            );
          }
          samplesTaken = { seed: 0, leasehold: 0, 'seed-async': 0 };
        }
        if (workers === workerCounts[workerCounts.length - 1]) {
          results.push(await sharedClientHot(store, prefix, workers, duration));
          // Two clients (the hand-off) and a queue of waiters.
          results.push(await leaseholdHandoff(clients.slice(0, 2), prefix, duration));
          results.push(await leaseholdHandoff(clients.slice(0, handoffWaiters), prefix, duration));
        }
      } finally {
        await Promise.all(clients.map((c) => c.close()));
        await store.close();
        await seedPool.end();
        await asyncPool.end();
      }
    }

    // ---- advisory locks (session level, one dedicated connection per worker) ----
    for (const workers of workerCounts) {
      const conns = await Promise.all(
        Array.from({ length: workers }, async () => {
          const c = new pg.Client({ connectionString: PG_URL });
          await c.connect();
          return c;
        }),
      );
      try {
        for (const keys of ['distinct', 'hot'] as const) {
          const m = await measure(workers, duration, async (w, until, samples) => {
            const c = conns[w]!;
            const k = keys === 'hot' ? 424242 : 424300 + w;
            let cycles = 0;
            let attempts = 0;
            while (performance.now() < until) {
              const t = performance.now();
              attempts++;
              const r = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
                k,
              ]);
              if (r.rows[0]?.ok !== true) continue;
              await c.query('SELECT pg_advisory_unlock($1)', [k]);
              samples.push(performance.now() - t);
              cycles++;
            }
            return { cycles, attempts };
          });
          results.push(
            row(
              'pg advisory lock',
              'cycle',
              workers,
              keys,
              m,
              'no token, no expiry, session-bound',
            ),
          );
        }
        if (workers === workerCounts[workerCounts.length - 1]) {
          results.push(await advisoryHandoff(conns.slice(0, 2), duration));
          results.push(await advisoryHandoff(conns.slice(0, handoffWaiters), duration));
        }
      } finally {
        await Promise.all(conns.map((c) => c.end()));
      }
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}_seed" CASCADE`).catch(() => undefined);
    await admin.end();
  }
  console.error(
    `bench postgres summary (machine shared: figures indicative):\n${summary.join('\n')}`,
  );
  return results;
}

/** A hot key with `wait` on one shared client: its waiters get the key by local hand-off. */
async function sharedClientHot(
  store: PostgresLeaseStore,
  prefix: string,
  workers: number,
  durationMs: number,
): Promise<BenchResult> {
  const c = new LeaseClient({ store, ownerId: 'bench-shared' });
  const key = `${prefix}/hot-shared`;
  try {
    const m = await measure(workers, durationMs, async (_w, until, samples) => {
      let cycles = 0;
      let attempts = 0;
      while (performance.now() < until) {
        const t = performance.now();
        attempts++;
        const r = await c.acquire(key, { ttl: 10_000, wait: 10_000 });
        if (r.status !== 'acquired') continue;
        await r.lease.release();
        samples.push(performance.now() - t);
        cycles++;
      }
      return { cycles, attempts };
    });
    return row('leasehold, one client, wait', 'cycle', workers, 'hot', m, 'local hand-off');
  } finally {
    await c.close();
  }
}

/**
 * Waiters (each its own LeaseClient on one store) queue on one key with `wait`; latency from a
 * release starting to the next grant.
 */
async function leaseholdHandoff(
  clients: LeaseClient[],
  prefix: string,
  durationMs: number,
): Promise<BenchResult> {
  const key = `${prefix}/handoff-lh`;
  let releasedAt: number | undefined;
  const m = await measure(clients.length, durationMs, async (w, until, samples) => {
    const c = clients[w]!;
    let cycles = 0;
    let attempts = 0;
    while (performance.now() < until) {
      attempts++;
      const left = Math.max(1, Math.ceil(until - performance.now()));
      const r = await c.acquire(key, { ttl: 10_000, wait: left + 1000 });
      if (r.status !== 'acquired') continue;
      if (releasedAt !== undefined) samples.push(performance.now() - releasedAt);
      cycles++;
      releasedAt = performance.now();
      await r.lease.release();
    }
    return { cycles, attempts };
  });
  return row(
    'leasehold',
    'handoff',
    clients.length,
    'hot',
    m,
    "LeaseClients of one store: woken from the release's own answer, no notification (decisions 022, 029)",
  );
}

/** Blocking `pg_advisory_lock` waiters: the server queues them and grants on unlock. */
async function advisoryHandoff(conns: pg.Client[], durationMs: number): Promise<BenchResult> {
  const k = 434343;
  let releasedAt: number | undefined;
  let stop = false;
  const m = await measure(conns.length, durationMs, async (w, until, samples) => {
    const c = conns[w]!;
    let cycles = 0;
    let attempts = 0;
    while (!stop) {
      attempts++;
      await c.query('SELECT pg_advisory_lock($1)', [k]);
      if (releasedAt !== undefined) samples.push(performance.now() - releasedAt);
      cycles++;
      if (performance.now() >= until) stop = true;
      releasedAt = performance.now();
      await c.query('SELECT pg_advisory_unlock($1)', [k]);
    }
    return { cycles, attempts };
  });
  return row('pg advisory lock', 'handoff', conns.length, 'hot', m, 'blocking pg_advisory_lock');
}
