import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it } from 'node:test';
import pg from 'pg';
import type { FenceResult } from '../../../src/core/results.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../../support/postgres.js';

/**
 * The protected data of the in-transaction examples: a report row per id (`body`, and the
 * token that wrote it) in a schema of its own, next to the fence's tables and functions,
 * installed by `PostgresFence.migrate()` as a user would.
 */
export class ReportDomain {
  readonly schema = uniqueSchema('fencetx');

  async setUp(): Promise<void> {
    const fence = new PostgresFence({ connectionString: PG_URL, schema: this.schema });
    try {
      await fence.migrate();
    } finally {
      await fence.close();
    }
    await withPgClient((c) =>
      c.query(`CREATE TABLE "${this.schema}".report (
                 id text PRIMARY KEY, body text NOT NULL, token bigint NOT NULL)`),
    );
  }

  tearDown(): Promise<void> {
    return dropSchema(this.schema);
  }

  /** The report row as committed, or undefined. */
  report(id: string): Promise<{ body: string; token: string } | undefined> {
    return withPgClient(async (c) => {
      const r = await c.query<{ body: string; token: string }>(
        `SELECT body, token::text AS token FROM "${this.schema}".report WHERE id = $1`,
        [id],
      );
      return r.rows[0];
    });
  }

  /** The scope's committed mark (0n when none). */
  mark(scope: string): Promise<bigint> {
    return withPgClient(async (c) => {
      const r = await c.query<{ hwm: string }>(
        `SELECT high_water::text AS hwm FROM "${this.schema}".leasehold_fence WHERE scope = $1`,
        [scope],
      );
      return r.rows[0] === undefined ? 0n : BigInt(r.rows[0].hwm);
    });
  }
}

/** How an example writes: `rollBack` makes the caller's transaction roll back after an `applied`. */
export type WriteReport = (
  scope: string,
  token: bigint,
  body: string,
  options?: { rollBack?: boolean; idempotencyKey?: string },
) => Promise<FenceResult<undefined>>;

/** Thrown inside a transaction to roll it back, carrying the fence's answer out. */
export class RollBack extends Error {
  constructor(readonly result: FenceResult<undefined>) {
    super(`rolled back after ${result.status}`);
  }
}

/**
 * The cases every tool shows (issue 43): a fresh token's write applied, a stale token refused
 * with its domain write rolled back (the row checked after), a transaction rolled back after
 * an applied fence leaving the mark where it was, and a repeated idempotency key.
 */
export function toolCases(domain: ReportDomain, write: () => WriteReport): void {
  const scope = (name: string): string => `report/${name}-${Math.random().toString(36).slice(2)}`;

  it("applies a fresh token's write with the mark, in the same transaction", async () => {
    const s = scope('fresh');
    assert.deepEqual(await write()(s, 5n, 'by 5'), { status: 'applied', value: undefined });
    assert.deepEqual(await domain.report(s), { body: 'by 5', token: '5' });
    assert.equal(await domain.mark(s), 5n);
  });

  it('refuses token 41 after token 42 was accepted, and its domain write rolls back with it', async () => {
    const s = scope('stale');
    assert.equal((await write()(s, 42n, 'by 42')).status, 'applied');
    const r = await write()(s, 41n, 'by 41');
    assert.deepEqual(r, { status: 'stale_fence', highWaterMark: 42n });
    assert.deepEqual(await domain.report(s), { body: 'by 42', token: '42' }, 'row unchanged');
    assert.equal(await domain.mark(s), 42n);
  });

  it('leaves the mark where it was when the transaction rolls back after an applied fence', async () => {
    const s = scope('rollback');
    assert.equal((await write()(s, 5n, 'by 5')).status, 'applied');
    assert.equal((await write()(s, 9n, 'by 9', { rollBack: true })).status, 'applied');
    assert.equal(await domain.mark(s), 5n, 'the mark did not move to 9');
    assert.deepEqual(await domain.report(s), { body: 'by 5', token: '5' });
    // 9 never reached the scope, so 7 still may write.
    assert.equal((await write()(s, 7n, 'by 7')).status, 'applied');
    assert.equal(await domain.mark(s), 7n);
  });

  it('answers duplicate for a repeated idempotency key within one generation', async () => {
    const s = scope('dup');
    assert.equal((await write()(s, 3n, 'first', { idempotencyKey: 'op-1' })).status, 'applied');
    assert.deepEqual(await write()(s, 3n, 'again', { idempotencyKey: 'op-1' }), {
      status: 'duplicate',
    });
    assert.deepEqual(await domain.report(s), { body: 'first', token: '3' });
  });
}

/** A pg pool on the test database, for the tools that take one. */
export function testPool(max = 2): pg.Pool {
  const pool = new pg.Pool({ connectionString: PG_URL, max });
  pool.on('error', () => undefined);
  return pool;
}

const pythons = new Map<string, string>();

/**
 * The Python with the named modules: Debian's packages install for `/usr/bin/python3`,
 * which may not be the first `python3` on PATH. Fails (never skips) when none has them.
 */
export function pythonWith(...modules: string[]): string {
  const check = `import ${modules.join(', ')}`;
  const known = pythons.get(check);
  if (known !== undefined) return known;
  for (const python of ['/usr/bin/python3', 'python3']) {
    const r = spawnSync(python, ['-c', check], { encoding: 'utf8' });
    if (r.status === 0) {
      pythons.set(check, python);
      return python;
    }
  }
  assert.fail(`no python3 can ${check} (scripts/setup-test-env.sh installs Debian's packages)`);
}
