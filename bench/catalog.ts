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
import { backendCpuMs } from './postgres-probes.js';

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

/**
 * The floor of any publish that keeps the history: the pointer's move (with the mark's
 * check) and one history row, in one PL/pgSQL call, and nothing else — no check of the object,
 * no collector bookkeeping, so not safe to use. On the catalog's own tables, for names of its
 * own. $1 name, $2 handle, $3 token, $4 lease id.
 */
const FLOOR_FN = (schema: string): string => `
CREATE OR REPLACE FUNCTION ${schema}.bench_publish_floor(
  p_name text, p_handle text, p_token bigint, p_lease_id text) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE v bigint; prev text; t timestamptz := clock_timestamp();
BEGIN
  UPDATE ${schema}.leasehold_catalog_pointer p SET handle = p_handle, token = p_token,
      lease_id = p_lease_id, version = p.version + 1, published_at = t, high_water = p_token,
      previous_handle = p.handle
    WHERE p.name = p_name AND p.high_water <= p_token
    RETURNING p.version, p.previous_handle INTO v, prev;
  INSERT INTO ${schema}.leasehold_catalog_history (name, version, handle, token, lease_key,
      lease_id, size, checksum, published_at)
    SELECT p_name, v, p_handle, p_token, p.lease_key, p_lease_id, p.size, p.checksum, t
    FROM ${schema}.leasehold_catalog_pointer p WHERE p.name = p_name;
  RETURN v::text || ' ' || COALESCE(prev, '');
END
$fn$`;

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

/**
 * The floor rows' own names (one per bench name), each with two staged handles and a pointer
 * row made by one real publish, so the floor's statements find a row to move.
 */
async function floorSetup(
  catalog: Catalog,
  names: string[],
  l: CatalogLease,
): Promise<{ floorNames: string[]; floorHandles: string[][] }> {
  const floorNames = names.map((n) => n.replace('/bench-', '/floor-'));
  const floorHandles = await prepare(catalog, floorNames, l);
  for (const [w, n] of floorNames.entries()) {
    const r = await catalog.publish(l, n, floorHandles[w]![0]!);
    if (r.status !== 'applied') throw new Error(`bench floor setup: ${r.status}`);
  }
  return { floorNames, floorHandles };
}

/**
 * The value a worker's next raw UPDATE writes: 0 and 1 in turn, per worker. One counter
 * shared by all workers (as before 2026-12-02) gave each of an even number of workers the
 * same value every time; SQLite does not rewrite a row whose bytes did not change, and a
 * commit that changed no page writes no WAL frame and does no fsync, so at 4 workers about
 * 96% of the baseline's commits wrote nothing (0.04 WAL frames per UPDATE, against 1.0 with
 * a counter per worker): a baseline that was not durable like a publish.
 */
function flipOf(flip: Uint32Array, worker: number): number {
  const f = flip[worker]!;
  flip[worker] = f + 1;
  return f % 2;
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

interface Subject {
  readonly subject: string;
  readonly notes?: string;
  readonly cycle: (worker: number) => Promise<void>;
  /** CPU used so far by the database backends this subject talks to (PostgreSQL), in ms. */
  readonly serverCpuMs?: () => Promise<number>;
}

type Measured = Awaited<ReturnType<typeof measureCycles>> & { serverCpuMs?: number };

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Measures the subjects in interleaved rounds, the order rotating every round, so that a
 * burst of load from other processes on a shared machine lands on every subject alike. Each
 * row is the median round; its ratio to the first subject (the raw baseline) is the median
 * of the per-round ratios, and so are the client and server CPU ratios. Server CPU is the
 * backends' user + system time from /proc (counts nothing for a remote server).
 */
async function interleaved(
  subjects: readonly Subject[],
  scenario: string,
  workers: number,
  o: BenchOptions,
): Promise<BenchResult[]> {
  const rounds = o.quick ? 3 : 11;
  const ms = Math.max(400, Math.round(o.durationMs / 3));
  const runs = subjects.map(() => [] as Measured[]);
  for (let round = 0; round < rounds; round++) {
    for (let j = 0; j < subjects.length; j++) {
      const i = (j + round) % subjects.length;
      const s = subjects[i]!;
      const cpu0 = await s.serverCpuMs?.();
      const m: Measured = await measureCycles(workers, ms, s.cycle);
      if (cpu0 !== undefined) m.serverCpuMs = (await s.serverCpuMs!()) - cpu0;
      runs[i]!.push(m);
    }
  }
  const serverPerK = (m: Measured): number | undefined =>
    m.serverCpuMs === undefined || m.cycles === 0 ? undefined : (m.serverCpuMs / m.cycles) * 1000;
  return subjects.map((s, i) => {
    const mine = runs[i]!;
    const base = runs[0]!;
    const m = [...mine].sort((a, b) => a.cyclesPerSec - b.cyclesPerSec)[Math.floor(rounds / 2)]!;
    const range = mine.map((r) => Math.round(r.cyclesPerSec)).join('/');
    const server = mine.map(serverPerK);
    const serverRatio =
      i === 0 || server.some((x) => x === undefined || x === 0)
        ? undefined
        : median(server.map((x, k) => x! / serverPerK(base[k]!)!));
    const notes = [
      ...(s.notes === undefined ? [] : [s.notes]),
      ...(serverRatio === undefined
        ? []
        : [`server CPU ${serverRatio.toFixed(2)}× raw's per cycle`]),
      `median of ${rounds} interleaved rounds (cycles/s ${range})`,
    ].join('; ');
    const serverMs = server.every((x) => x !== undefined) ? median(server) : undefined;
    return {
      ...row(s.subject, scenario, workers, m),
      ...(serverMs === undefined || serverMs === 0 ? {} : { serverCpuMsPer1000: serverMs }),
      ...(i === 0
        ? {}
        : {
            ratioToRaw: median(mine.map((r, k) => r.cyclesPerSec / base[k]!.cyclesPerSec)),
            cpuRatioToRaw: median(mine.map((r, k) => r.cpuMsPer1000 / base[k]!.cpuMsPer1000)),
          }),
      notes,
    };
  });
}

/**
 * Publish vs the bare fenced pointer UPDATE (PostgreSQL and SQLite, 1 and 4 workers); stage
 * vs a direct durable file write. Like with like: each side has its own connections, reused
 * (a pool of `workers` on PostgreSQL, one handle on SQLite); the same durability
 * (PostgreSQL's synchronous_commit as the server has it, SQLite WAL + synchronous FULL); on
 * PostgreSQL neither side uses a named prepared statement (the UPDATE is an unnamed
 * extended-protocol statement, the publish a simple-protocol message; the publish
 * function's own statements are planned once per connection), on SQLite both are prepared.
 */
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
      // One pool per subject, named, so each subject's backends (and their CPU) are its own.
      const app = (what: string): string => `lh-bench-catalog-${process.pid}-${what}-${workers}`;
      const poolFor = (what: string): pg.Pool =>
        new pg.Pool({
          connectionString: PG_URL,
          max: workers,
          idleTimeoutMillis: 0,
          application_name: app(what),
          options: `-c search_path=${schema}`,
        });
      const rawPool = poolFor('raw');
      const fencePool = poolFor('fence');
      const catalogPool = poolFor('publish');
      for (const n of names) {
        await rawPool.query(
          'INSERT INTO report_catalog VALUES ($1, $2, 1, now()) ON CONFLICT DO NOTHING',
          [n, 'x'],
        );
      }
      // Per worker, so each UPDATE of a worker's row changes its value (see flipOf).
      const flip = new Uint32Array(names.length);
      // The same UPDATE inside a PostgresFence write: what the fence's transaction alone costs.
      const fence = new PostgresFence({ pool: fencePool, schema, table: 'bench_fence' });
      const pointers = new PostgresPointerStore({ pool: catalogPool, schema });
      const catalog = new Catalog({
        pointers,
        objects: new DirectoryObjectStore({ root: join(tmp.dir, `pg-${workers}`) }),
      });
      const l = lease(5n);
      const handles = await prepare(catalog, names, l);
      const turn = new Uint32Array(names.length);
      const { floorNames, floorHandles } = await floorSetup(catalog, names, l);
      await admin.query(FLOOR_FN(schema));
      const floorPool = poolFor('floor');
      const floorTurn = new Uint32Array(names.length);
      const cpuOf = (what: string) => (): Promise<number> => backendCpuMs(admin, app(what));
      const subjects: Subject[] = [
        {
          subject: 'raw fenced UPDATE (pg, the textbook statement)',
          serverCpuMs: cpuOf('raw'),
          cycle: async (w) => {
            await rawPool.query(RAW_UPDATE_PG, [`${names[w]}@${flipOf(flip, w)}`, '5', names[w]]);
          },
        },
        {
          subject: 'PostgresFence.write + the same UPDATE',
          notes: 'BEGIN + mark, the UPDATE, COMMIT: 3 round trips',
          serverCpuMs: cpuOf('fence'),
          cycle: async (w) => {
            const r = await fence.write({ scope: names[w]!, token: 5n }, (tx) =>
              tx.query(RAW_UPDATE_PG, [`${names[w]}@${flipOf(flip, w)}`, '5', names[w]]),
            );
            if (r.status !== 'applied') throw new Error(`bench fence: ${r.status}`);
          },
        },
        {
          subject: 'floor: pointer move + history row only (pg, not safe)',
          notes:
            'the same pointer UPDATE and history INSERT in one PL/pgSQL call, without the object check or the collector bookkeeping: what any publish that keeps a history costs at least',
          serverCpuMs: cpuOf('floor'),
          cycle: async (w) => {
            const k = (floorTurn[w] = (floorTurn[w] ?? 0) + 1) % 2;
            await floorPool.query(`SELECT ${schema}.bench_publish_floor($1, $2, 5, $3)`, [
              floorNames[w],
              floorHandles[w]![k],
              l.leaseId,
            ]);
          },
        },
        {
          subject: 'leasehold catalog.publish (pg)',
          notes:
            'one call of the publish function (the mark in the pointer row, pointer, history; the new object row locked, no registry row written, decision 028): one round trip, one commit',
          serverCpuMs: cpuOf('publish'),
          cycle: async (w) => {
            const k = (turn[w] = (turn[w] ?? 0) + 1) % 2;
            const r = await catalog.publish(l, names[w]!, handles[w]![k]!);
            if (r.status !== 'applied') throw new Error(`bench publish: ${r.status}`);
          },
        },
      ];
      results.push(...(await interleaved(subjects, 'publish pg', workers, o)));
      await catalog.close();
      await fence.close();
      for (const p of [rawPool, fencePool, floorPool, catalogPool]) await p.end();
    }

    // SQLite: synchronous, one handle each; WAL + synchronous FULL on both sides. With 4
    // workers, four callers share the handle (a single-writer database): the raw UPDATEs take
    // turns, one commit and fsync each; publishes that meet share one transaction and its
    // fsync (decision 024).
    const db = new Database(join(tmp.dir, 'raw.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(RAW_TABLE.replace('bigint', 'INTEGER').replace('timestamptz', 'REAL'));
    const upd = db.prepare(RAW_UPDATE_SQLITE);
    const catalog = new Catalog({
      pointers: new SqlitePointerStore({ path: join(tmp.dir, 'catalog.db') }),
      objects: new DirectoryObjectStore({ root: join(tmp.dir, 'sqlite-objects') }),
    });
    const l = lease(5n);
    // The floor on SQLite: the pointer's move and the history row in one immediate
    // transaction on the catalog's own file and tables (its own handle and names), nothing
    // else — no object check, no collector bookkeeping, no group commit; not safe to use.
    const floorDb = new Database(join(tmp.dir, 'catalog.db'));
    floorDb.pragma('synchronous = FULL');
    const floorMove = floorDb.prepare(`UPDATE leasehold_catalog_pointer SET handle = ?,
      token = ?, lease_id = ?, version = version + 1, published_ms = ?, high_water = ?,
      previous_handle = handle WHERE name = ? AND high_water <= ?`);
    const floorHistory = floorDb.prepare(`INSERT INTO leasehold_catalog_history
      (name, version, handle, token, lease_key, lease_id, size, checksum, published_ms, idempotency_key)
      SELECT name, version, handle, token, lease_key, lease_id, size, checksum, published_ms, NULL
      FROM leasehold_catalog_pointer WHERE name = ?`);
    const floorPublish = floorDb
      .transaction((name: string, handle: string): void => {
        floorMove.run(handle, 5, l.leaseId, Date.now(), 5, name, 5);
        floorHistory.run(name);
      })
      .immediate.bind(null);
    for (const workers of o.quick ? [1] : [1, 4]) {
      const names = Array.from({ length: workers }, (_, w) => `reports/bench-${workers}-${w}`);
      for (const n of names)
        db.prepare('INSERT INTO report_catalog VALUES (?, ?, 1, 0)').run(n, 'x');
      const handles = await prepare(catalog, names, l);
      const turn = new Uint32Array(names.length);
      const flip = new Uint32Array(names.length);
      const { floorNames, floorHandles } = await floorSetup(catalog, names, l);
      const floorTurn = new Uint32Array(names.length);
      results.push(
        ...(await interleaved(
          [
            {
              subject: 'raw fenced UPDATE (better-sqlite3, same sync policy)',
              cycle: (w) => {
                upd.run(`${names[w]}@${flipOf(flip, w)}`, 5, names[w], 5);
                return Promise.resolve();
              },
            },
            {
              subject: 'floor: pointer move + history row only (sqlite, not safe)',
              notes:
                'the same UPDATE and history INSERT in one immediate transaction, without the object check, the collector bookkeeping or group commit: what any publish that keeps a history costs at least',
              cycle: (w) => {
                const k = (floorTurn[w] = (floorTurn[w] ?? 0) + 1) % 2;
                floorPublish(floorNames[w]!, floorHandles[w]![k]!);
                return Promise.resolve();
              },
            },
            {
              subject: 'leasehold catalog.publish (sqlite)',
              notes:
                'one immediate transaction (the mark in the pointer row, pointer, history; no registry row, decision 028), shared by the publishes that meet, a savepoint each (decision 024)',
              cycle: async (w) => {
                const k = (turn[w] = (turn[w] ?? 0) + 1) % 2;
                const r = await catalog.publish(l, names[w]!, handles[w]![k]!);
                if (r.status !== 'applied') throw new Error(`bench publish: ${r.status}`);
              },
            },
          ],
          'publish sqlite',
          workers,
          o,
        )),
      );
    }
    db.close();
    floorDb.close();

    // Stage: a 64 KiB object vs writing the same file directly with the same durability.
    const body = randomBytes(64 * 1024);
    const rawDir = join(tmp.dir, 'raw-files');
    await mkdir(rawDir, { recursive: true });
    let i = 0;
    results.push(
      ...(await interleaved(
        [
          {
            subject: 'raw file write (wx, fsync file + directory)',
            cycle: async () => {
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
            },
          },
          {
            subject: 'leasehold catalog.stage (sqlite + directory)',
            notes:
              'registry row before the bytes, size and checksum after: two SQLite commits + the durable file write',
            cycle: async () => {
              await catalog.stage(l, 'reports/stage-bench', body);
            },
          },
        ],
        'stage 64 KiB',
        1,
        o,
      )),
    );
    await catalog.close();
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await admin.end();
    tmp.remove();
  }
  return results;
}
