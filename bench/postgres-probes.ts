import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { Measured } from './postgres.js';

/** Probes and baselines of the PostgreSQL bench (bench/postgres.ts). */

// The seed's statements (§4), as a program using them directly would run them.
export const SEED_ACQUIRE = (t: string): string => `
INSERT INTO ${t} (resource_key, owner_id, lease_until, fencing_token)
VALUES ($1, $2, clock_timestamp() + $3::interval, 1)
ON CONFLICT (resource_key) DO UPDATE
SET owner_id = EXCLUDED.owner_id, lease_until = clock_timestamp() + $3::interval,
    fencing_token = coordination_lease.fencing_token + 1
WHERE coordination_lease.lease_until <= clock_timestamp()
RETURNING fencing_token, lease_until`;
export const SEED_RELEASE = (t: string): string => `
UPDATE ${t} SET owner_id = NULL, lease_until = '-infinity'::timestamptz
WHERE resource_key = $1 AND owner_id = $2 AND fencing_token = $3`;

/** The seed's table (§4) exactly, without leasehold's columns and triggers. */
export const SEED_TABLE = (t: string): string => `
CREATE TABLE ${t} (
  resource_key text PRIMARY KEY,
  owner_id uuid,
  lease_until timestamptz NOT NULL DEFAULT '-infinity'::timestamptz,
  fencing_token bigint NOT NULL DEFAULT 0 CHECK (fencing_token >= 0)
)`;

export type Loop = (
  worker: number,
  until: number,
  samples: number[],
) => Promise<{ cycles: number; attempts: number }>;

/** The seed's upsert, then its conditional release, as a program using them directly would. */
export function seedLoop(
  pool: pg.Pool,
  table: string,
  keyPrefix: string,
  keys: 'distinct' | 'hot',
): Loop {
  return async (w, until, samples) => {
    const key = keys === 'hot' ? keyPrefix : `${keyPrefix}-${w}`;
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
  };
}

/** The measurements of several rounds as one. */
export function combine(ms: Measured[]): Measured {
  return {
    cycles: ms.reduce((a, m) => a + m.cycles, 0),
    attempts: ms.reduce((a, m) => a + m.attempts, 0),
    elapsedMs: ms.reduce((a, m) => a + m.elapsedMs, 0),
    cpuMs: ms.reduce((a, m) => a + m.cpuMs, 0),
    samples: ms.flatMap((m) => m.samples),
  };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor((s.length - 1) / 2)]!;
}

export const round2 = (x: number): number => Math.round(x * 100) / 100;

/** CPU (user + system) used so far by the backends of connections named `app`, from /proc. */
export async function backendCpuMs(admin: pg.Client, app: string): Promise<number> {
  const r = await admin.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
    [app],
  );
  let ticks = 0;
  for (const { pid } of r.rows) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // Not on this machine (a remote server) or already gone: counts nothing.
    }
  }
  return ticks * (1000 / CLOCK_TICKS);
}

const CLOCK_TICKS = 100;

/**
 * Samples what the backends of `app` wait on, every 200 ms for `durationMs`, adding the
 * counts per wait (`Lock:object` is the database-wide lock NOTIFY takes at commit) to `into`.
 * Answers the number of samples.
 */
export async function sampleWaits(
  admin: pg.Client,
  app: string,
  durationMs: number,
  into: Map<string, number>,
): Promise<number> {
  const until = performance.now() + durationMs - 100;
  let n = 0;
  for (let i = 0; i < 100 && performance.now() < until; i++) {
    await sleep(200);
    const r = await admin.query<{ w: string; n: number }>(
      `SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU') AS w, count(*)::int AS n
       FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' GROUP BY 1`,
      [app],
    );
    for (const { w, n: k } of r.rows) into.set(w, (into.get(w) ?? 0) + k);
    n++;
  }
  return n;
}
