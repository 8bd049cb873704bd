import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { Lease } from '../../../src/core/lease.js';
import type { FenceResult } from '../../../src/core/results.js';
import {
  PostgresFence,
  type FenceDecision,
  type FenceTransaction,
} from '../../../src/fencing/postgres.js';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { Barrier, Gate } from '../../support/barrier.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { elapse, eventually } from '../../support/time.js';

describe('PostgresFence', () => {
  const schema = uniqueSchema('fence');
  const q = quoteIdent(schema);
  let admin: pg.Client;
  let fence: PostgresFence;
  let store: PostgresLeaseStore;

  /** The protected resource: a report row, and a log of accepted writes in commit order. */
  const writeReport =
    (scope: string, token: bigint, body: string) =>
    async (tx: FenceTransaction): Promise<string> => {
      await tx.query(`INSERT INTO ${q}.write_log (scope, token) VALUES ($1, $2)`, [
        scope,
        token.toString(),
      ]);
      await tx.query(
        `INSERT INTO ${q}.report (id, body, token) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token`,
        [scope, body, token.toString()],
      );
      return body;
    };

  async function report(scope: string): Promise<{ body: string; token: string } | undefined> {
    const r = await admin.query<{ body: string; token: string }>(
      `SELECT body, token::text FROM ${q}.report WHERE id = $1`,
      [scope],
    );
    return r.rows[0];
  }

  async function logOf(scope: string): Promise<bigint[]> {
    const r = await admin.query<{ token: string }>(
      `SELECT token::text FROM ${q}.write_log WHERE scope = $1 ORDER BY seq`,
      [scope],
    );
    return r.rows.map((x) => BigInt(x.token));
  }

  before(async () => {
    admin = new pg.Client({ connectionString: PG_URL });
    admin.on('error', () => undefined);
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${q}`);
    await admin.query(
      `CREATE TABLE ${q}.report (id text PRIMARY KEY, body text NOT NULL, token bigint NOT NULL)`,
    );
    await admin.query(
      `CREATE TABLE ${q}.write_log (seq bigserial PRIMARY KEY, scope text NOT NULL, token bigint NOT NULL)`,
    );
    store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 4 });
    await store.migrate();
    fence = new PostgresFence({
      connectionString: PG_URL,
      schema,
      leaseTable: { schema },
      maxConnections: 32,
    });
    await fence.migrate();
  });
  after(async () => {
    await fence?.close();
    await store?.close();
    await admin?.end();
    await dropSchema(schema);
  });

  it('32 concurrent writers with interleaved tokens: the highest token wins and no lower token lands after a higher one', async () => {
    const scope = uniqueKey('race32');
    // A fixed permutation of 1..32 (13 is coprime with 32), so arrival order is mixed.
    const tokens = Array.from({ length: 32 }, (_, i) => BigInt(((i * 13) % 32) + 1));
    const start = new Barrier(tokens.length);
    const results = await Promise.all(
      tokens.map(async (t) => {
        await start.arrive();
        return {
          token: t,
          result: await fence.write({ scope, token: t }, writeReport(scope, t, `by ${t}`)),
        };
      }),
    );
    const applied = results.filter((r) => r.result.status === 'applied').map((r) => r.token);
    const stale = results.filter((r) => r.result.status === 'stale_fence');
    assert.equal(applied.length + stale.length, 32, 'every writer gets applied or stale_fence');
    assert.ok(applied.includes(32n), 'the highest token is always applied');
    assert.ok(stale.length > 0, 'out-of-order arrivals must meet refusals (the test can see them)');
    for (const s of stale) {
      const hwm = (s.result as Extract<FenceResult, { status: 'stale_fence' }>).highWaterMark;
      assert.ok(hwm > s.token, `stale ${s.token} must report a higher mark, got ${hwm}`);
    }
    const log = await logOf(scope);
    assert.deepEqual(
      [...log].sort((a, b) => (a < b ? -1 : 1)),
      [...applied].sort((a, b) => (a < b ? -1 : 1)),
      'the log holds exactly the applied writes',
    );
    for (let i = 1; i < log.length; i++) {
      assert.ok(log[i]! > log[i - 1]!, `accepted ${log[i]} after ${log[i - 1]}`);
    }
    assert.deepEqual(await report(scope), { body: 'by 32', token: '32' });
    assert.equal(await fence.highWaterMark(scope), 32n);
  });

  it('rejects token 41 after token 42 was accepted: the paused writer resumes into stale_fence', async () => {
    const key = uniqueKey('report/july');
    // Start the key's counter at 40 so the seed's numbers appear literally.
    await admin.query(
      `INSERT INTO ${q}.coordination_lease (resource_key, fencing_token) VALUES ($1, 40)`,
      [key],
    );
    const a = new LeaseClient({ store, ownerId: 'writer-a' });
    const b = new LeaseClient({ store, ownerId: 'writer-b' });
    const ra = await a.acquire(key, { ttl: 300, autoRenew: false });
    assert.equal(ra.status, 'acquired');
    const leaseA = (ra as { lease: Lease }).lease;
    assert.equal(leaseA.token, 41n);

    // A prepares its write and then pauses before sending it.
    const resumeA = new Gate();
    const aPrepared = new Gate();
    const writerA = (async () => {
      const body = 'report by A';
      aPrepared.open();
      await resumeA.promise;
      return fence.write({ scope: key, token: leaseA.token }, writeReport(key, leaseA.token, body));
    })();
    await aPrepared.promise;

    // A's lease runs out (real TTL at the store); B is granted 42 and publishes.
    const leaseB = await eventually('B to be granted after A expires', async () => {
      const r = await b.acquire(key, { ttl: 10_000 });
      return r.status === 'acquired' ? r.lease : undefined;
    });
    assert.equal(leaseB.token, 42n);
    const rb = await fence.write(
      { scope: key, token: leaseB.token },
      writeReport(key, leaseB.token, 'report by B'),
    );
    assert.equal(rb.status, 'applied');

    resumeA.open();
    const resultA = await writerA;
    assert.deepEqual(resultA, { status: 'stale_fence', highWaterMark: 42n });
    assert.deepEqual(await report(key), { body: 'report by B', token: '42' });
    assert.deepEqual(await logOf(key), [42n]);
    await leaseB.release();
    await leaseA.release();
    await a.close();
    await b.close();
  });

  it('with lease validation, holds off a new grant while the fenced transaction is open, and refuses an expired lease', async () => {
    const key = uniqueKey('validated');
    const a = new LeaseClient({ store, ownerId: 'writer-a' });
    const ra = await a.acquire(key, { ttl: 400, autoRenew: false });
    assert.equal(ra.status, 'acquired');
    const leaseA = (ra as { lease: Lease }).lease;

    const checked = new Gate();
    const finish = new Gate();
    const writing = fence.write(
      { scope: key, token: leaseA.token, lease: { key, leaseId: leaseA.leaseId } },
      async (tx) => {
        checked.open();
        await finish.promise;
        return writeReport(key, leaseA.token, 'validated by A')(tx);
      },
    );
    await checked.promise;
    await elapse(600); // let A's lease run out at the store while its transaction is open
    // The expired row is locked FOR UPDATE by A's transaction: no grant can pass it.
    await assert.rejects(
      store.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'b', ttlMs: 5000, value: undefined },
        { timeoutMs: 300, signal: new AbortController().signal },
      ),
      (err: unknown) => isLeaseholdError(err, 'ERR_UNAVAILABLE'),
    );
    finish.open();
    assert.equal((await writing).status, 'applied');
    assert.equal(await fence.highWaterMark(key), leaseA.token);

    // Now the lease is expired: validation refuses it, though no one else holds the key.
    let ran = false;
    const refused = await fence.write(
      { scope: key, token: leaseA.token, lease: { key, leaseId: leaseA.leaseId } },
      () => {
        ran = true;
      },
    );
    assert.deepEqual(refused, { status: 'stale_fence', highWaterMark: leaseA.token });
    assert.equal(ran, false, 'nothing runs for a stale writer');
    assert.deepEqual(await logOf(key), [leaseA.token]);

    const b = new LeaseClient({ store, ownerId: 'writer-b' });
    const rb = await b.acquire(key, { ttl: 5000 });
    assert.equal(rb.status, 'acquired');
    const leaseB = (rb as { lease: Lease }).lease;
    assert.ok(leaseB.token > leaseA.token);
    const ok = await fence.write(
      { scope: key, token: leaseB.token, lease: { key, leaseId: leaseB.leaseId } },
      writeReport(key, leaseB.token, 'validated by B'),
    );
    assert.equal(ok.status, 'applied');
    // A's lease id with B's token is not B's lease.
    const forged = await fence.write(
      { scope: key, token: leaseB.token, lease: { key, leaseId: leaseA.leaseId } },
      () => undefined,
    );
    assert.equal(forged.status, 'stale_fence');
    await leaseB.release();
    await leaseA.release();
    await a.close();
    await b.close();
  });

  it('with lease validation, lets local successors under one store lease write in turn, and no token outside the block', async () => {
    const key = uniqueKey('successors');
    const a = new LeaseClient({ store, ownerId: 'writer-a', localSuccessors: 2 });
    const first = (await a.acquire(key, { ttl: 10_000 })) as { lease: Lease };
    const waiting = a.acquire(key, { ttl: 10_000, wait: 5_000 });
    // Renewed after the waiter began, so it may succeed locally (decision 007, "Clock faults").
    const began = a.now();
    for (let i = 0; i < 1000 && a.now() <= began; i++)
      await new Promise((resolve) => setTimeout(resolve, 1));
    assert.equal((await first.lease.renew()).status, 'renewed');
    await first.lease.release();
    const r2 = await waiting;
    assert.equal(r2.status, 'acquired');
    const second = (r2 as { lease: Lease }).lease;
    assert.equal(second.token, first.lease.token + 1n);
    assert.equal(second.leaseId, first.lease.leaseId, 'the same store lease');
    const lease = { key, leaseId: second.leaseId };
    const ok = await fence.write(
      { scope: key, token: second.token, lease },
      writeReport(key, second.token, 'by the successor'),
    );
    assert.equal(ok.status, 'applied');
    // The earlier holder of the block is behind the high-water mark now.
    const late = await fence.write({ scope: key, token: first.lease.token, lease }, () => {
      assert.fail('a stale writer must not run');
    });
    assert.equal(late.status, 'stale_fence');
    // A token above the block is not this lease's, though the store lease is live.
    const beyond = await fence.write({ scope: key, token: first.lease.token + 3n, lease }, () =>
      assert.fail('a token outside the block must not run'),
    );
    assert.equal(beyond.status, 'stale_fence');
    assert.deepEqual(await logOf(key), [second.token]);
    await second.release();
    await a.close();
  });

  it('answers duplicate for a repeated idempotency key within one generation, and runs nothing', async () => {
    const scope = uniqueKey('idem');
    let runs = 0;
    const counted = async (tx: FenceTransaction): Promise<number> => {
      runs++;
      await tx.query('SELECT 1');
      return runs;
    };
    assert.deepEqual(await fence.write({ scope, token: 5n, idempotencyKey: 'op-1' }, counted), {
      status: 'applied',
      value: 1,
    });
    assert.deepEqual(await fence.write({ scope, token: '5', idempotencyKey: 'op-1' }, counted), {
      status: 'duplicate',
    });
    assert.equal(runs, 1);
    assert.equal(
      (await fence.write({ scope, token: 5n, idempotencyKey: 'op-2' }, counted)).status,
      'applied',
    );
    assert.equal(
      (await fence.write({ scope, token: 6n, idempotencyKey: 'op-1' }, counted)).status,
      'applied',
      'a new generation may repeat a key',
    );
    assert.deepEqual(await fence.write({ scope, token: 5n, idempotencyKey: 'op-1' }, counted), {
      status: 'stale_fence',
      highWaterMark: 6n,
    });
    assert.equal(runs, 3);

    const strict = new PostgresFence({
      connectionString: PG_URL,
      schema,
      table: 'strict_fence',
      policy: '>',
      maxConnections: 2,
    });
    try {
      assert.equal(
        (await strict.write({ scope, token: 7n, idempotencyKey: 'k' }, counted)).status,
        'applied',
      );
      assert.deepEqual(await strict.write({ scope, token: 7n, idempotencyKey: 'k' }, counted), {
        status: 'duplicate',
      });
      assert.deepEqual(
        await strict.write({ scope, token: 7n, idempotencyKey: 'other' }, counted),
        { status: 'stale_fence', highWaterMark: 7n },
        "policy '>' accepts one write per grant",
      );
      assert.deepEqual(await strict.write({ scope, token: 7n }, counted), {
        status: 'stale_fence',
        highWaterMark: 7n,
      });
      assert.equal((await strict.write({ scope, token: 8n }, counted)).status, 'applied');
    } finally {
      await strict.close();
    }
  });

  it('leaves mark and data consistent when the backend is killed between check and commit', async () => {
    const scope = uniqueKey('crash');
    assert.equal(
      (await fence.write({ scope, token: 9n }, writeReport(scope, 9n, 'by 9'))).status,
      'applied',
    );
    let killed = false;
    await assert.rejects(
      fence.write({ scope, token: 10n }, async (tx) => {
        await writeReport(scope, 10n, 'by 10')(tx);
        const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!
          .pid;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        killed = true;
        return 'written, not committed';
      }),
      (err: unknown) => isLeaseholdError(err, 'ERR_UNAVAILABLE'),
    );
    assert.equal(killed, true);
    assert.equal(await fence.highWaterMark(scope), 9n, 'the mark did not move');
    assert.deepEqual(await report(scope), { body: 'by 9', token: '9' }, 'the data did not move');
    assert.deepEqual(await logOf(scope), [9n]);
    // The retry goes through on a fresh connection.
    assert.equal(
      (await fence.write({ scope, token: 10n }, writeReport(scope, 10n, 'by 10'))).status,
      'applied',
    );
    assert.deepEqual(await report(scope), { body: 'by 10', token: '10' });
    assert.equal(await fence.highWaterMark(scope), 10n);
  });

  it("rolls back the mark when the caller's write throws, and hands the error back unchanged", async () => {
    const scope = uniqueKey('throws');
    const boom = new Error('domain rule broken');
    await assert.rejects(
      fence.write({ scope, token: 3n }, async (tx) => {
        await writeReport(scope, 3n, 'never')(tx);
        throw boom;
      }),
      (err: unknown) => err === boom,
    );
    assert.equal(await fence.highWaterMark(scope), 0n);
    assert.equal(await report(scope), undefined);
  });

  it('refuses malformed tokens before touching the database', async () => {
    const scope = uniqueKey('badtoken');
    const bad: unknown[] = [
      41,
      '041',
      '1e3',
      ' 5',
      '+5',
      '0x10',
      '12abc',
      '',
      '٣',
      0n,
      -1n,
      2n ** 63n,
      null,
    ];
    let ran = false;
    for (const token of bad) {
      await assert.rejects(
        fence.write({ scope, token: token as bigint }, () => {
          ran = true;
        }),
        (err: unknown) =>
          isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && err.message.startsWith('token'),
        `token ${String(token)}`,
      );
    }
    assert.equal(ran, false);
    assert.equal(await fence.highWaterMark(scope), 0n);
  });

  it('tells onDecision each final decision once the transaction has ended, never a thrown write', async () => {
    const scope = uniqueKey('hook');
    const seen: Array<FenceDecision & { markInHook: bigint }> = [];
    const pending: Promise<void>[] = [];
    const watched: PostgresFence = new PostgresFence({
      connectionString: PG_URL,
      schema,
      maxConnections: 2,
      onDecision: (d) => {
        // Read the committed mark from another connection: the decision is already final.
        // Recorded in decision order; the reads may finish in any order (two connections).
        const entry = { ...d, markInHook: -1n };
        seen.push(entry);
        pending.push(
          watched.highWaterMark(d.scope).then((markInHook) => {
            entry.markInHook = markInHook;
          }),
        );
      },
    });
    try {
      const w = (token: bigint, key?: string): Promise<FenceResult<string>> =>
        watched.write(
          { scope, token, ...(key === undefined ? {} : { idempotencyKey: key }) },
          writeReport(scope, token, `by ${token}`),
        );
      assert.equal((await w(42n, 'op-1')).status, 'applied');
      assert.equal((await w(42n, 'op-1')).status, 'duplicate');
      assert.deepEqual(await w(41n), { status: 'stale_fence', highWaterMark: 42n });
      await assert.rejects(
        watched.write({ scope, token: 43n }, () => {
          throw new Error('domain rule broken');
        }),
        /domain rule broken/,
      );
      await Promise.all(pending);
      assert.deepEqual(seen, [
        { scope, token: 42n, status: 'applied', markInHook: 42n },
        { scope, token: 42n, status: 'duplicate', markInHook: 42n },
        { scope, token: 41n, status: 'stale_fence', highWaterMark: 42n, markInHook: 42n },
      ]);
    } finally {
      await watched.close();
    }
  });
});
