import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { fenceIn, pgQuery } from '../../../src/fencing/in-transaction/index.js';
import { PG_URL, withPgClient } from '../../support/postgres.js';
import { pythonWith, ReportDomain, testPool } from './domain.js';

const WRITER = fileURLToPath(
  new URL('../../../../test/fencing/in-transaction/interleave_writer.py', import.meta.url),
);
const ROUNDS = 30;

/**
 * Issue 43, "what it must show" 2: TypeScript (fenceIn over pg) and Python (psycopg calling
 * the SQL function) write to one scope at the same time, with tokens from one sequence, each
 * also replaying its previous token after taking a new one (a paused old owner's late write,
 * always below the mark). The accepted writes, in the order they committed, never go back.
 */
describe('the fence from TypeScript and Python at once, on one scope', () => {
  const domain = new ReportDomain();
  const scope = 'report/two-languages';
  let pool: pg.Pool;
  before(async () => {
    await domain.setUp();
    await withPgClient((c) =>
      c.query(`CREATE SEQUENCE "${domain.schema}".tokens;
               CREATE TABLE "${domain.schema}".write_log (
                 seq bigserial PRIMARY KEY, scope text NOT NULL, token bigint NOT NULL,
                 writer text NOT NULL)`),
    );
    pool = testPool(1);
  });
  after(async () => {
    await pool.end();
    await domain.tearDown();
  });

  /** One fenced write from TypeScript: the fence, then the log row only when applied. */
  async function tsWrite(client: pg.PoolClient, token: bigint): Promise<string> {
    await client.query('BEGIN');
    try {
      const r = await fenceIn(pgQuery(client), { scope, token }, { schema: domain.schema });
      if (r.status === 'applied') {
        await client.query(
          `INSERT INTO "${domain.schema}".write_log (scope, token, writer) VALUES ($1, $2, 'ts')`,
          [scope, token.toString()],
        );
      }
      await client.query('COMMIT');
      return r.status;
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    }
  }

  it('accepted tokens never go back, and no stale write is accepted (0 of the late writes)', async () => {
    const python = spawn(
      pythonWith('psycopg'),
      [WRITER, PG_URL, domain.schema, scope, String(ROUNDS)],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stderr = '';
    python.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => python.on('exit', resolve));
    const lines: string[] = [];
    const reader = createInterface({ input: python.stdout });
    const ready = new Promise<void>((resolve) =>
      reader.on('line', (line) => (line === 'ready' ? resolve() : lines.push(line))),
    );
    await Promise.race([
      ready,
      exited.then((code) => assert.fail(`python exited ${code} before ready: ${stderr}`)),
    ]);

    const tsAnswers: Array<{ token: bigint; status: string; late: boolean }> = [];
    const client = await pool.connect();
    try {
      python.stdin.write('go\n'); // both writers start now
      let previous: bigint | undefined;
      for (let i = 0; i < ROUNDS; i++) {
        const next = await client.query<{ t: string }>(
          `SELECT nextval('"${domain.schema}".tokens')::text AS t`,
        );
        const token = BigInt(next.rows[0]!.t);
        tsAnswers.push({ token, status: await tsWrite(client, token), late: false });
        if (previous !== undefined) {
          tsAnswers.push({ token: previous, status: await tsWrite(client, previous), late: true });
        }
        previous = token;
      }
    } finally {
      client.release();
    }
    assert.equal(await exited, 0, stderr);

    // Python prints its own: "TOKEN STATUS", the late write right after the new token's.
    const pyAnswers = lines.map((line) => {
      const [token, status] = line.split(' ');
      return { token: BigInt(token!), status: status! };
    });
    assert.equal(pyAnswers.length, 2 * ROUNDS - 1, lines.join('\n'));
    const pyLate = pyAnswers.filter((_, i) => i > 0 && i % 2 === 0);

    const log = await withPgClient((c) =>
      c.query<{ token: string; writer: string }>(
        `SELECT token::text AS token, writer FROM "${domain.schema}".write_log ORDER BY seq`,
      ),
    );
    let highest = 0n;
    let staleAccepted = 0;
    for (const row of log.rows) {
      const t = BigInt(row.token);
      if (t < highest) staleAccepted++;
      if (t > highest) highest = t;
    }
    const applied = (xs: Array<{ status: string }>): number =>
      xs.filter((x) => x.status === 'applied').length;
    const figures = {
      writes: tsAnswers.length + pyAnswers.length,
      accepted: log.rows.length,
      ts_accepted: applied(tsAnswers),
      py_accepted: applied(pyAnswers),
      stale_writes_rejected:
        tsAnswers.length + pyAnswers.length - applied(tsAnswers) - applied(pyAnswers),
      stale_writes_accepted: staleAccepted,
    };
    process.stdout.write(`# two languages: ${JSON.stringify(figures)}\n`);

    assert.equal(staleAccepted, 0, 'the accepted sequence went back');
    assert.equal(log.rows.length, figures.ts_accepted + figures.py_accepted);
    assert.ok(figures.ts_accepted > 0 && figures.py_accepted > 0, JSON.stringify(figures));
    // Every late write (a token below one its own writer already wrote or saw refused) lost.
    for (const late of [...tsAnswers.filter((a) => a.late), ...pyLate]) {
      assert.equal(late.status, 'stale_fence', `late token ${late.token}`);
    }
    assert.equal(await domain.mark(scope), highest);
  });
});
