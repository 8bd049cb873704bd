import { Redis } from 'ioredis';
import pg from 'pg';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { PostgresFence } from '../../src/fencing/postgres.js';
import { RedisFence } from '../../src/fencing/redis.js';
import {
  ArmTally,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { Barrier, Gate } from '../support/barrier.js';
import { FenceHistory, type ResourceLogEntry } from '../support/fence-history.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

// F27 with the resource in PostgreSQL (PostgresFence) and in Redis (RedisFence): writers on
// separate connections race at the resource's server with tokens in shuffled order. The
// fence's check and advance are atomic with the write, so the resource's log (in commit
// order, written with the data) shows non-decreasing applied tokens; the check-then-write
// control (read the mark, then write data and mark in separate statements) lets racing
// writes land out of order. The control's race is driven, not hoped for: in each round every
// writer reads the mark first, then those whose check passed write one after another,
// highest token first (a {@link Round}), so every control run shows the anomaly however the
// machine schedules the writers.

const SCOPE = 'job';
const WRITERS = 4;
const PER_WRITER = 15;

type Outcome = { status: string; highWaterMark?: bigint };
type Send = (writer: number, op: string, token: bigint, round: Round) => Promise<Outcome>;

/**
 * One round of the control arm: each writer's check, then the passed writers' writes in
 * descending token order, each after the one before it has finished.
 */
class Round {
  private readonly checked = new Barrier(WRITERS);
  private readonly passed = new Map<number, bigint>();
  private readonly writtenBy = new Map<number, Gate>();

  /** After writer `w`'s check: waits for every writer's check, then for `w`'s turn to write. */
  async checkedAndTurn(w: number, token: bigint, ok: boolean): Promise<void> {
    if (ok) this.passed.set(w, token);
    await this.checked.arrive();
    if (!ok) return;
    const order = [...this.passed].sort((a, b) => (b[1] > a[1] ? 1 : b[1] < a[1] ? -1 : 0));
    const at = order.findIndex(([writer]) => writer === w);
    if (at > 0) await this.gate(order[at - 1]![0]).promise;
  }

  /** Writer `w`'s write has finished (or failed): the next one may go. */
  written(w: number): void {
    this.gate(w).open();
  }

  private gate(w: number): Gate {
    let g = this.writtenBy.get(w);
    if (g === undefined) this.writtenBy.set(w, (g = new Gate()));
    return g;
  }
}

function shuffledTokens(): bigint[] {
  const tokens = Array.from({ length: WRITERS * PER_WRITER }, (_, i) => BigInt(i + 1));
  for (let i = tokens.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [tokens[i], tokens[j]] = [tokens[j]!, tokens[i]!];
  }
  return tokens;
}

/** Every writer sends its share of the shuffled tokens in turn, all writers at once (the control arm in rounds). */
async function race(h: FenceHistory, fenced: boolean, send: Send): Promise<void> {
  const tokens = shuffledTokens();
  const rounds = Array.from({ length: PER_WRITER }, () => new Round());
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      for (let k = 0; k < PER_WRITER; k++) {
        const token = tokens[w * PER_WRITER + k]!;
        const op = h.invoke(`p${w}`, SCOPE, token, fenced);
        const r = await send(w, op, token, rounds[k]!);
        h.answer(`p${w}`, op, SCOPE, token, r.status === 'applied' ? 'ok' : 'stale');
      }
    }),
  );
}

describe('F27 racing writes at a PostgreSQL resource', () => {
  let server: ThrowawayPostgres | undefined;
  before(
    async () => {
      server = await startThrowawayPostgres();
    },
    { timeout: STORE_START_TIMEOUT_MS },
  );
  after(() => server?.destroy());

  it(
    'atomic fence: applied tokens never go down in commit order; check-then-write: racing writes land out of order',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(2, 20);
      const arms = new ArmTally(runs);
      const db = new pg.Pool({ connectionString: server!.url, max: WRITERS + 2 });
      db.on('error', () => undefined);
      try {
        for (let i = 0; i < runs; i++) {
          for (const fenced of [true, false]) {
            const schema = `lh_f27_${process.pid}_${i}_${fenced ? 'f' : 'c'}`;
            await db.query(
              `CREATE SCHEMA ${schema};
               CREATE TABLE ${schema}.job (scope text PRIMARY KEY, token bigint NOT NULL);
               CREATE TABLE ${schema}.mark (scope text PRIMARY KEY, hwm bigint NOT NULL);
               CREATE TABLE ${schema}.log (seq bigserial PRIMARY KEY, op text NOT NULL,
                 token bigint NOT NULL, action text NOT NULL, hwm bigint)`,
            );
            // The data write and its log entry in one statement: the log is in commit order.
            const dataWrite = `WITH d AS (INSERT INTO ${schema}.job (scope, token) VALUES ($1, $2)
                ON CONFLICT (scope) DO UPDATE SET token = EXCLUDED.token RETURNING token)
              INSERT INTO ${schema}.log (op, token, action) SELECT $3, token, 'applied' FROM d`;
            const fence = new PostgresFence({ pool: db, schema });
            const h = new FenceHistory('F27');
            try {
              await race(h, fenced, async (w, op, token, round) => {
                if (fenced) {
                  const r = await fence.write({ scope: SCOPE, token }, async (tx) => {
                    await tx.query('SELECT pg_sleep(0.002)');
                    await tx.query(dataWrite, [SCOPE, String(token), op]);
                  });
                  if (r.status === 'stale_fence')
                    await db.query(
                      `INSERT INTO ${schema}.log (op, token, action, hwm) VALUES ($1, $2, 'rejected', $3)`,
                      [op, String(token), String(r.highWaterMark)],
                    );
                  return r;
                }
                const { rows } = await db.query<{ hwm: string }>(
                  `SELECT hwm FROM ${schema}.mark WHERE scope = $1`,
                  [SCOPE],
                );
                const hwm = BigInt(rows[0]?.hwm ?? '0');
                await round.checkedAndTurn(w, token, token >= hwm);
                if (token < hwm) return { status: 'stale_fence', highWaterMark: hwm };
                try {
                  await db.query(dataWrite, [SCOPE, String(token), op]);
                  await db.query(
                    `INSERT INTO ${schema}.mark (scope, hwm) VALUES ($1, $2)
                     ON CONFLICT (scope) DO UPDATE SET hwm = EXCLUDED.hwm`,
                    [SCOPE, String(token)],
                  );
                } finally {
                  round.written(w);
                }
                return { status: 'applied' };
              });
              const { rows } = await db.query<{
                op: string;
                token: string;
                action: string;
                hwm: string | null;
              }>(`SELECT op, token, action, hwm FROM ${schema}.log ORDER BY seq`);
              const log: ResourceLogEntry[] = rows.map((r) => ({
                op: r.op,
                token: r.token,
                action: r.action === 'applied' ? 'applied' : 'rejected',
                ...(r.hwm === null ? {} : { hwm: r.hwm }),
              }));
              const report = h.check(SCOPE, log);
              arms.add(
                fenced,
                report,
                `run ${i} ${fenced ? 'fenced' : 'control'}\n${formatReport(report)}`,
              );
            } finally {
              await fence.close();
            }
          }
        }
      } finally {
        await db.end();
      }
      arms.conclude('real F27 postgres-resource');
    },
  );
});

describe('F27 racing writes at a Redis resource', () => {
  let server: RedisProcess | undefined;
  before(
    async () => {
      server = await startRedis();
    },
    { timeout: STORE_START_TIMEOUT_MS },
  );
  after(() => server?.stop());

  it(
    'atomic fence script: applied tokens never go down in commit order; check-then-write: racing writes land out of order',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(2, 20);
      const arms = new ArmTally(runs);
      // One connection per writer: their commands interleave at the server.
      const conns = Array.from({ length: WRITERS }, () => {
        const r = new Redis({ port: server!.port, host: '127.0.0.1' });
        r.on('error', () => undefined);
        return r;
      });
      try {
        for (let i = 0; i < runs; i++) {
          for (const fenced of [true, false]) {
            const prefix = `lh:f27:${process.pid}:${i}:${fenced ? 'f' : 'c'}:`;
            const data = `${prefix}{${SCOPE}}:data`;
            const logKey = `${prefix}{${SCOPE}}:log`;
            const markKey = `${prefix}{${SCOPE}}:mark`;
            const fences = conns.map((redis) => new RedisFence({ redis, prefix }));
            const h = new FenceHistory('F27');
            await race(h, fenced, async (w, op, token, round) => {
              const redis = conns[w]!;
              const entry = JSON.stringify({ op, token: String(token), action: 'applied' });
              if (fenced) {
                // The write and its log entry run inside the fence's one script.
                const r = await fences[w]!.commands(SCOPE, token, [
                  { command: 'SET', keys: [data], args: [String(token)] },
                  { command: 'RPUSH', keys: [logKey], args: [entry] },
                ]);
                if (r.status === 'stale_fence')
                  await redis.rpush(
                    logKey,
                    JSON.stringify({
                      op,
                      token: String(token),
                      action: 'rejected',
                      hwm: String(r.highWaterMark),
                    }),
                  );
                return r;
              }
              const hwm = BigInt((await redis.get(markKey)) ?? '0');
              await round.checkedAndTurn(w, token, token >= hwm);
              if (token < hwm) return { status: 'stale_fence', highWaterMark: hwm };
              try {
                await redis.multi().set(data, String(token)).rpush(logKey, entry).exec();
                await redis.set(markKey, String(token));
              } finally {
                round.written(w);
              }
              return { status: 'applied' };
            });
            const log = (await conns[0]!.lrange(logKey, 0, -1)).map(
              (l) => JSON.parse(l) as ResourceLogEntry,
            );
            const report = h.check(SCOPE, log);
            arms.add(
              fenced,
              report,
              `run ${i} ${fenced ? 'fenced' : 'control'}\n${formatReport(report)}`,
            );
          }
        }
      } finally {
        for (const c of conns) c.disconnect();
      }
      arms.conclude('real F27 redis-resource');
    },
  );
});
