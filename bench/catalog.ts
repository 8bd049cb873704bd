import Database from 'better-sqlite3';
import { randomBytes, randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { Catalog } from '../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../src/fencing/catalog/objects/directory.js';
import { PostgresPointerStore } from '../src/fencing/catalog/pointers/postgres/index.js';
import { SqlitePointerStore } from '../src/fencing/catalog/pointers/sqlite/store.js';
import { PostgresFence } from '../src/fencing/postgres.js';
import type { CatalogLease } from '../src/fencing/catalog/results.js';
import { tempDir } from '../test/support/tmp.js';
import { measureCycles, type BenchOptions, type BenchResult } from './lib.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const SUITE = 'catalog';

// The article's catalog statement, as a program using it directly would run it (autocommit).
const RAW_TABLE = `CREATE TABLE report_catalog (
  report_id text PRIMARY KEY, visible_object text NOT NULL, accepted_fence bigint NOT NULL,
  published_at timestamptz NOT NULL)`;
const RAW_UPDATE_PG = `UPDATE report_catalog SET visible_object = $1, accepted_fence = $2,
  published_at = CURRENT_TIMESTAMP WHERE report_id = $3 AND accepted_fence <= $2`;
const RAW_UPDATE_SQLITE = `UPDATE report_catalog SET visible_object = ?, accepted_fence = ?,
  published_at = unixepoch('subsec') WHERE report_id = ? AND accepted_fence <= ?`;

function lease(token: bigint): CatalogLease {
  return { key: 'report/bench', leaseId: randomUUID(), token, remainingMs: () => 60_000 };
}

/** Two staged handles per name, published in turn: each publish moves the pointer and unreferences the other. */
async function prepare(catalog: Catalog, names: string[], l: CatalogLease): Promise<string[][]> {
  const out: string[][] = [];
  for (const n of names) {
    out.push([
      (await catalog.stage(l, n, 'one')).handle,
      (await catalog.stage(l, n, 'two')).handle,
    ]);
  }
  return out;
}

function row(
  subject: string,
  scenario: string,
  workers: number,
  m: Awaited<ReturnType<typeof measureCycles>>,
  notes?: string,
): BenchResult {
  return {
    suite: SUITE,
    subject,
    scenario,
    workers,
    keys: 'distinct',
    cyclesPerSec: m.cyclesPerSec,
    p50Ms: m.p50Ms,
    p99Ms: m.p99Ms,
    cpuMsPer1000: m.cpuMsPer1000,
    ...(notes === undefined ? {} : { notes }),
  };
}

interface PgSubject {
  readonly subject: string;
  readonly notes?: string;
  readonly cycle: (worker: number) => Promise<void>;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/**
 * Measures the subjects in interleaved rounds (the order alternating), so that a burst of
 * load from other processes on a shared machine does not land on one subject only. Each row
 * is the median round; its ratio to the first subject (the raw UPDATE) is the median of the
 * per-round ratios.
 */
async function interleaved(
  subjects: readonly PgSubject[],
  workers: number,
  o: BenchOptions,
): Promise<BenchResult[]> {
  const rounds = o.quick ? 2 : 6;
  const ms = Math.max(500, Math.round(o.durationMs / 2));
  const runs = subjects.map(() => [] as Awaited<ReturnType<typeof measureCycles>>[]);
  for (let round = 0; round < rounds; round++) {
    const order = subjects.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) runs[i]!.push(await measureCycles(workers, ms, subjects[i]!.cycle));
  }
  return subjects.map((s, i) => {
    const mine = runs[i]!;
    const m = [...mine].sort((a, b) => a.cyclesPerSec - b.cyclesPerSec)[Math.floor(rounds / 2)]!;
    const range = mine.map((r) => Math.round(r.cyclesPerSec)).join('/');
    const base = row(s.subject, 'publish pg', workers, m);
    return {
      ...base,
      ...(i === 0
        ? {}
        : {
            ratioToRaw: median(mine.map((r, k) => r.cyclesPerSec / runs[0]![k]!.cyclesPerSec)),
            cpuRatioToRaw: median(mine.map((r, k) => r.cpuMsPer1000 / runs[0]![k]!.cpuMsPer1000)),
          }),
      notes: `${s.notes === undefined ? '' : `${s.notes}; `}median of ${rounds} interleaved rounds (cycles/s ${range})`,
    };
  });
}

/** Publish vs the bare fenced pointer UPDATE (PostgreSQL and SQLite); stage vs a direct durable file write. */
export async function catalogBenchmarks(o: BenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const tmp = tempDir('bench-catalog');
  const schema = `lh_bench_catalog_${process.pid}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
    await admin.query(`SET search_path = ${schema}; ${RAW_TABLE}`);
    for (const workers of o.quick ? [1] : [1, 4]) {
      const names = Array.from({ length: workers }, (_, w) => `reports/bench-${workers}-${w}`);
      // Raw: the article's UPDATE on a pool, one round trip, autocommit.
      const pool = new pg.Pool({
        connectionString: PG_URL,
        max: workers,
        options: `-c search_path=${schema}`,
      });
      for (const n of names) {
        await pool.query(
          'INSERT INTO report_catalog VALUES ($1, $2, 1, now()) ON CONFLICT DO NOTHING',
          [n, 'x'],
        );
      }
      let flip = 0;
      // The same UPDATE inside a PostgresFence write: what the fence's transaction alone costs.
      const fence = new PostgresFence({ pool, schema, table: 'bench_fence' });
      const pointers = new PostgresPointerStore({
        connectionString: PG_URL,
        schema,
        maxConnections: workers,
      });
      const catalog = new Catalog({
        pointers,
        objects: new DirectoryObjectStore({ root: join(tmp.dir, `pg-${workers}`) }),
      });
      const l = lease(5n);
      const handles = await prepare(catalog, names, l);
      const turn = new Uint32Array(names.length);
      const subjects: PgSubject[] = [
        {
          subject: 'raw fenced UPDATE (pg, the article’s statement)',
          cycle: async (w) => {
            await pool.query(RAW_UPDATE_PG, [`${names[w]}@${flip++ % 2}`, '5', names[w]]);
          },
        },
        {
          subject: 'PostgresFence.write + the same UPDATE',
          notes: 'BEGIN + mark, the UPDATE, COMMIT: 3 round trips',
          cycle: async (w) => {
            const r = await fence.write({ scope: names[w]!, token: 5n }, (tx) =>
              tx.query(RAW_UPDATE_PG, [`${names[w]}@${flip++ % 2}`, '5', names[w]]),
            );
            if (r.status !== 'applied') throw new Error(`bench fence: ${r.status}`);
          },
        },
        {
          subject: 'leasehold catalog.publish (pg)',
          notes:
            'one call of the publish function (mark in the pointer row, pointer, history, registry): one round trip, one commit',
          cycle: async (w) => {
            const k = (turn[w] = (turn[w] ?? 0) + 1) % 2;
            const r = await catalog.publish(l, names[w]!, handles[w]![k]!);
            if (r.status !== 'applied') throw new Error(`bench publish: ${r.status}`);
          },
        },
      ];
      results.push(...(await interleaved(subjects, workers, o)));
      await fence.close();
      await pool.end();
      await catalog.close();
    }

    // SQLite: synchronous, one writer; WAL + synchronous FULL on both sides.
    {
      const path = join(tmp.dir, 'raw.db');
      const db = new Database(path);
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.exec(RAW_TABLE.replace('bigint', 'INTEGER').replace('timestamptz', 'REAL'));
      db.prepare("INSERT INTO report_catalog VALUES ('reports/bench', 'x', 1, 0)").run();
      const upd = db.prepare(RAW_UPDATE_SQLITE);
      let flip = 0;
      results.push(
        row(
          'raw fenced UPDATE (better-sqlite3, same sync policy)',
          'publish sqlite',
          1,
          await measureCycles(1, o.durationMs, () => {
            upd.run(`x@${flip++ % 2}`, 5, 'reports/bench', 5);
            return Promise.resolve();
          }),
        ),
      );
      db.close();
      const catalog = new Catalog({
        pointers: new SqlitePointerStore({ path: join(tmp.dir, 'catalog.db') }),
        objects: new DirectoryObjectStore({ root: join(tmp.dir, 'sqlite-objects') }),
      });
      const l = lease(5n);
      const [handles] = await prepare(catalog, ['reports/bench'], l);
      let turn = 0;
      results.push(
        row(
          'leasehold catalog.publish (sqlite)',
          'publish sqlite',
          1,
          await measureCycles(1, o.durationMs, async () => {
            const r = await catalog.publish(l, 'reports/bench', handles![turn++ % 2]!);
            if (r.status !== 'applied') throw new Error(`bench publish: ${r.status}`);
          }),
          'mark + pointer + history + registry in one SqliteFence transaction',
        ),
      );

      // Stage: a 64 KiB object vs writing the same file directly with the same durability.
      const body = randomBytes(64 * 1024);
      const rawDir = join(tmp.dir, 'raw-files');
      await mkdir(rawDir, { recursive: true });
      let i = 0;
      results.push(
        row(
          'raw file write (wx, fsync file + directory)',
          'stage 64 KiB',
          1,
          await measureCycles(1, o.durationMs, async () => {
            const f = await open(
              join(rawDir, `f-${i++}`),
              constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
            );
            await f.write(body);
            await f.sync();
            await f.close();
            const d = await open(rawDir, constants.O_RDONLY);
            await d.sync();
            await d.close();
          }),
        ),
      );
      results.push(
        row(
          'leasehold catalog.stage (sqlite + directory)',
          'stage 64 KiB',
          1,
          await measureCycles(1, o.durationMs, async () => {
            await catalog.stage(l, 'reports/stage-bench', body);
          }),
          'registry row before the bytes, size and checksum after: two SQLite commits + the durable file write',
        ),
      );
      await catalog.close();
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await admin.end();
    tmp.remove();
  }
  return results;
}
