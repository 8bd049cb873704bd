import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import pg from 'pg';
import { after, before, describe, it } from 'node:test';
import { formatReport, type CheckReport } from '../../src/check/checker.js';
import { PostgresFence, type FenceTransaction } from '../../src/fencing/postgres.js';
import { RedisFence } from '../../src/fencing/redis.js';
import {
  ArmTally,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { FenceHistory, type ResourceLogEntry } from '../support/fence-history.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

// F26 with the resource in PostgreSQL (PostgresFence) and in Redis (RedisFence): the
// resource's server process is crashed in the middle of the writes and restarted; after the
// restart the mark must still be ≥ every token the resource acknowledged, so a stale writer
// whose token lies below it is refused. The resource events of the history are the
// resource's acknowledgements as they arrived (what a crash must not take back).
//
// Controls, each the way such a resource really loses its mark: PostgreSQL with the mark
// advanced in a second transaction after the data's (killed in between); Redis without
// persistence (the documented requirement is AOF with `appendfsync always`).

const SCOPE = 'job';

class Acks {
  readonly log: ResourceLogEntry[] = [];
  constructor(
    readonly h: FenceHistory,
    private readonly fenced: boolean,
  ) {}

  /** Runs one write, recording its invoke, its answer and (when answered) the resource's decision. */
  async write(
    proc: string,
    token: bigint,
    send: (op: string) => Promise<{ status: string; highWaterMark?: bigint }>,
  ): Promise<string> {
    const op = this.h.invoke(proc, SCOPE, token, this.fenced);
    let r: { status: string; highWaterMark?: bigint };
    try {
      r = await send(op);
    } catch {
      this.h.answer(proc, op, SCOPE, token, 'unknown');
      return 'unknown';
    }
    const applied = r.status === 'applied';
    this.h.answer(proc, op, SCOPE, token, applied ? 'ok' : 'stale');
    this.log.push({
      op,
      token: String(token),
      action: applied ? 'applied' : 'rejected',
      ...(r.highWaterMark === undefined ? {} : { hwm: String(r.highWaterMark) }),
    });
    return r.status;
  }
}

function where(report: CheckReport, extra: string): string {
  return `${extra}\n${formatReport(report)}`;
}

describe('F26 resource server crashed mid-writes, PostgreSQL resource', () => {
  let server: ThrowawayPostgres | undefined;
  before(
    async () => {
      server = await startThrowawayPostgres();
    },
    { timeout: STORE_START_TIMEOUT_MS },
  );
  after(() => server?.destroy());

  const pool = (): pg.Pool => {
    const p = new pg.Pool({ connectionString: server!.url, max: 3 });
    p.on('error', () => undefined);
    return p;
  };

  /** The data write and its entry in the resource's log, in one statement. */
  const dataWrite = (schema: string): string =>
    `WITH d AS (INSERT INTO ${schema}.job (scope, token) VALUES ($1, $2)
       ON CONFLICT (scope) DO UPDATE SET token = EXCLUDED.token RETURNING token)
     INSERT INTO ${schema}.log (op, token, action) SELECT $3, token, 'applied' FROM d`;

  /** The resource's own log, in commit order (the applied entries commit with the data). */
  async function resourceLog(db: pg.Pool, schema: string): Promise<ResourceLogEntry[]> {
    const { rows } = await db.query<{
      op: string;
      token: string;
      action: string;
      hwm: string | null;
    }>(`SELECT op, token, action, hwm FROM ${schema}.log ORDER BY seq`);
    return rows.map((r) => ({
      op: r.op,
      token: r.token,
      action: r.action === 'applied' ? 'applied' : 'rejected',
      ...(r.hwm === null ? {} : { hwm: r.hwm }),
    }));
  }

  /** The control's write: check and data in one statement, the mark in a second one. */
  async function splitMarkWrite(
    db: pg.Pool,
    schema: string,
    op: string,
    token: bigint,
    between?: () => void,
  ): Promise<{ status: string; highWaterMark?: bigint }> {
    const { rows } = await db.query<{ hwm: string }>(
      `SELECT hwm FROM ${schema}.mark WHERE scope = $1`,
      [SCOPE],
    );
    const hwm = BigInt(rows[0]?.hwm ?? '0');
    if (token < hwm) return { status: 'stale_fence', highWaterMark: hwm };
    await db.query(dataWrite(schema), [SCOPE, String(token), op]);
    between?.();
    await db.query(
      `INSERT INTO ${schema}.mark (scope, hwm) VALUES ($1, $2)
       ON CONFLICT (scope) DO UPDATE SET hwm = EXCLUDED.hwm`,
      [SCOPE, String(token)],
    );
    return { status: 'applied' };
  }

  it(
    'atomic fence: after the crash and restart the mark covers every acknowledged token and the data, and the stale writer is refused; the split-mark control lets it in',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(2, 20);
      const arms = new ArmTally(runs);
      for (let i = 0; i < runs; i++) {
        for (const fencing of [true, false]) {
          const schema = `lh_f26_${process.pid}_${i}_${fencing ? 'f' : 'c'}`;
          const h = new FenceHistory('F26');
          const acks = new Acks(h, fencing);
          let db = pool();
          await db.query(
            `CREATE SCHEMA ${schema};
             CREATE TABLE ${schema}.job (scope text PRIMARY KEY, token bigint NOT NULL);
             CREATE TABLE ${schema}.mark (scope text PRIMARY KEY, hwm bigint NOT NULL);
             CREATE TABLE ${schema}.log (seq bigserial PRIMARY KEY, op text NOT NULL,
               token bigint NOT NULL, action text NOT NULL, hwm bigint)`,
          );
          let fence = new PostgresFence({ pool: db, schema });
          const fencedWrite = async (
            f: PostgresFence,
            op: string,
            token: bigint,
            inside?: (tx: FenceTransaction) => Promise<void>,
          ): Promise<{ status: string; highWaterMark?: bigint }> => {
            const r = await f.write({ scope: SCOPE, token }, async (tx) => {
              await inside?.(tx);
              await tx.query(dataWrite(schema), [SCOPE, String(token), op]);
            });
            if (r.status === 'stale_fence')
              await db.query(
                `INSERT INTO ${schema}.log (op, token, action, hwm) VALUES ($1, $2, 'rejected', $3)`,
                [op, String(token), String(r.highWaterMark)],
              );
            return r;
          };
          try {
            for (const t of [10n, 11n, 12n]) {
              const s = await acks.write('w', t, (op) =>
                fencing ? fencedWrite(fence, op, t) : splitMarkWrite(db, schema, op, t),
              );
              assert.equal(s, 'applied');
            }
            if (fencing) {
              // Crashed while the next write's transaction is open (its write not yet sent).
              let entered!: () => void;
              const inside = new Promise<void>((resolve) => (entered = resolve));
              const pending = acks.write('w', 13n, (op) =>
                fencedWrite(fence, op, 13n, async (tx) => {
                  entered();
                  await tx.query('SELECT pg_sleep(60)');
                }),
              );
              await inside;
              h.fault('crash', 'postgres: pg_ctl stop -m immediate, mid-transaction');
              server!.crash();
              assert.equal(await pending, 'unknown');
            } else {
              // Crashed after the data's commit, before the mark's.
              const pending = acks.write('w', 13n, (op) =>
                splitMarkWrite(db, schema, op, 13n, () => {
                  h.fault('crash', 'postgres: pg_ctl stop -m immediate, between data and mark');
                  server!.crash();
                }),
              );
              assert.equal(await pending, 'unknown');
            }
            server!.start();
            await db.end().catch(() => undefined);
            db = pool();
            fence = new PostgresFence({ pool: db, schema });
            const dataToken = BigInt(
              (await db.query<{ token: string }>(`SELECT token FROM ${schema}.job`)).rows[0]!.token,
            );
            const hwm = fencing
              ? await fence.highWaterMark(SCOPE)
              : BigInt(
                  (await db.query<{ hwm: string }>(`SELECT hwm FROM ${schema}.mark`)).rows[0]!.hwm,
                );
            // A stale writer with the token just below the data's.
            const stale = dataToken - 1n;
            const s = await acks.write('stale', stale, (op) =>
              fencing ? fencedWrite(fence, op, stale) : splitMarkWrite(db, schema, op, stale),
            );
            const report = h.check(SCOPE, await resourceLog(db, schema));
            const w = where(
              report,
              `run ${i} ${fencing ? 'fenced' : 'control'} data=${dataToken} mark=${hwm} stale write: ${s}`,
            );
            if (fencing) {
              assert.ok(hwm >= 12n, w);
              assert.equal(dataToken, hwm, `data and mark move together\n${w}`);
              assert.equal(s, 'stale_fence', w);
            }
            arms.add(fencing, report, w);
          } finally {
            await fence.close().catch(() => undefined);
            await db.end().catch(() => undefined);
          }
        }
      }
      arms.conclude('real F26 postgres-resource', { minAnomalyShare: 1 });
    },
  );
});

describe('F26 resource server killed mid-writes, Redis resource', () => {
  let durable: RedisProcess | undefined;
  let volatile: RedisProcess | undefined;
  before(
    async () => {
      durable = await startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
      volatile = await startRedis();
    },
    { timeout: STORE_START_TIMEOUT_MS },
  );
  after(async () => {
    await durable?.stop();
    await volatile?.stop();
  });

  it(
    'with AOF appendfsync always the mark survives SIGKILL and restart and the stale writer is refused; without persistence (control) it is let in',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(2, 20);
      const arms = new ArmTally(runs);
      for (let i = 0; i < runs; i++) {
        for (const fencing of [true, false]) {
          // Both arms use the fence; the control's Redis is one that forgets on restart.
          const server = fencing ? durable! : volatile!;
          const prefix = `lh:f26:${process.pid}:${i}:`;
          const h = new FenceHistory('F26');
          const acks = new Acks(h, true);
          const connect = (): Redis => {
            const r = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
            r.on('error', () => undefined);
            return r;
          };
          let redis = connect();
          const write = (t: bigint): Promise<{ status: string; highWaterMark?: bigint }> =>
            new RedisFence({ redis, prefix }).set(SCOPE, t, `${prefix}{${SCOPE}}:data`, String(t));
          try {
            for (const t of [10n, 11n, 12n])
              assert.equal(await acks.write('w', t, () => write(t)), 'applied');
            // SIGKILL right after the last acknowledgement: no graceful shutdown, no save.
            h.fault('crash', 'redis: SIGKILL after the acknowledgement of token 12');
            redis.disconnect();
            await server.restart();
            redis = connect();
            const hwm = await new RedisFence({ redis, prefix }).highWaterMark(SCOPE);
            const s = await acks.write('stale', 11n, () => write(11n));
            const report = h.check(SCOPE, acks.log);
            const w = where(
              report,
              `run ${i} ${fencing ? 'aof always' : 'no persistence'} mark after restart=${hwm} stale write: ${s}`,
            );
            if (fencing) {
              assert.ok(hwm >= 12n, w);
              assert.equal(s, 'stale_fence', w);
            }
            arms.add(fencing, report, w);
          } finally {
            redis.disconnect();
          }
        }
      }
      arms.conclude('real F26 redis-resource', { minAnomalyShare: 1 });
    },
  );
});
