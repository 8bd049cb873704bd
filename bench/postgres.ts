import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { LeaseClient } from '../src/core/client.js';
import { PostgresLeaseStore } from '../src/stores/postgres/store.js';
import type { BenchOptions, BenchResult } from './lib.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const SUITE = 'postgres';

// The seed's statements (§4), as a program using them directly would run them.
const SEED_ACQUIRE = (t: string): string => `
INSERT INTO ${t} (resource_key, owner_id, lease_until, fencing_token)
VALUES ($1, $2, clock_timestamp() + $3::interval, 1)
ON CONFLICT (resource_key) DO UPDATE
SET owner_id = EXCLUDED.owner_id, lease_until = clock_timestamp() + $3::interval,
    fencing_token = coordination_lease.fencing_token + 1
WHERE coordination_lease.lease_until <= clock_timestamp()
RETURNING fencing_token, lease_until`;
const SEED_RELEASE = (t: string): string => `
UPDATE ${t} SET owner_id = NULL, lease_until = '-infinity'::timestamptz
WHERE resource_key = $1 AND owner_id = $2 AND fencing_token = $3`;

interface Measured {
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

/**
 * leasehold's PostgreSQL store against the peers a Postgres user would pick instead, in the
 * same run: session-level advisory locks on dedicated connections, and the seed's raw
 * upsert + release statements (the limit: the same writes without a library).
 * Scenarios: acquire+release cycles at 1 and 32 workers on distinct keys and on one hot
 * key, and handoff latency (release → next waiter's grant) on a hot key.
 */
export async function postgresBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const schema = `lh_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  const table = `"${schema}".coordination_lease`;
  const duration = opts.durationMs;
  const workerCounts = [1, 32];
  const handoffWaiters = opts.quick ? 4 : 8;
  const results: BenchResult[] = [];
  const prefix = `bench/${randomBytes(3).toString('hex')}`;

  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    // ---- leasehold ----
    for (const workers of workerCounts) {
      const store = new PostgresLeaseStore({
        connectionString: PG_URL,
        schema,
        maxConnections: workers,
      });
      await store.migrate();
      const clients = Array.from(
        { length: workers },
        (_, i) => new LeaseClient({ store, ownerId: `bench-${i}` }),
      );
      for (const keys of ['distinct', 'hot'] as const) {
        const m = await measure(workers, duration, async (w, until, samples) => {
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
        });
        results.push(row('leasehold', 'cycle', workers, keys, m, 'p50/p99: one acquire+release'));
      }
      if (workers === workerCounts[workerCounts.length - 1]) {
        results.push(await leaseholdHandoff(clients.slice(0, handoffWaiters), prefix, duration));
      }
      await Promise.all(clients.map((c) => c.close()));
      await store.close();
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
          results.push(await advisoryHandoff(conns.slice(0, handoffWaiters), duration));
        }
      } finally {
        await Promise.all(conns.map((c) => c.end()));
      }
    }

    // ---- the seed's raw statements ----
    for (const workers of workerCounts) {
      const pool = new pg.Pool({ connectionString: PG_URL, max: workers });
      try {
        for (const keys of ['distinct', 'hot'] as const) {
          const m = await measure(workers, duration, async (w, until, samples) => {
            const key = keys === 'hot' ? `${prefix}/hot-raw` : `${prefix}/raw-${w}`;
            let cycles = 0;
            let attempts = 0;
            while (performance.now() < until) {
              const t = performance.now();
              attempts++;
              const owner = randomUUID();
              const r = await pool.query<{ fencing_token: string }>(SEED_ACQUIRE(table), [
                key,
                owner,
                '10 seconds',
              ]);
              const token = r.rows[0]?.fencing_token;
              if (token === undefined) continue;
              await pool.query(SEED_RELEASE(table), [key, owner, token]);
              samples.push(performance.now() - t);
              cycles++;
            }
            return { cycles, attempts };
          });
          results.push(
            row(
              'raw seed upsert + release',
              'cycle',
              workers,
              keys,
              m,
              'busy answers lock the row and take an xid',
            ),
          );
        }
      } finally {
        await pool.end();
      }
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
  return results;
}

/** Waiters queue on one key with `wait`; latency from a release starting to the next grant. */
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
  return row('leasehold', 'handoff', clients.length, 'hot', m, 'waiters woken by LISTEN/NOTIFY');
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
