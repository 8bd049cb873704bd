import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../../src/core/client.js';
import { isLeaseholdError } from '../../../../src/core/errors.js';
import { PostgresFence, type FenceTransaction } from '../../../../src/fencing/postgres.js';
import { PostgresLeaseStore } from '../../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../../support/keys.js';
import { startPgBouncer, type PgBouncerProcess } from '../../../support/pgbouncer.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../../support/postgres.js';

// The seed's statements (000_239fd4fe4243a931.txt §4), copied literally except that the table
// is schema-qualified: behind transaction pooling a `SET search_path` would not stick.
const seedSql = (table: string) => ({
  acquire: `
INSERT INTO ${table}
(resource_key, owner_id, lease_until, fencing_token)
VALUES
($1, $2, clock_timestamp() + $3::interval, 1)
ON CONFLICT (resource_key) DO UPDATE
SET owner_id = EXCLUDED.owner_id,
lease_until = clock_timestamp() + $3::interval,
fencing_token = coordination_lease.fencing_token + 1
WHERE coordination_lease.lease_until <= clock_timestamp()
RETURNING fencing_token, lease_until;`,
  release: `
UPDATE ${table}
SET owner_id = NULL,
lease_until = '-infinity'::timestamptz
WHERE resource_key = $1
AND owner_id = $2
AND fencing_token = $3;`,
});

describe('the fence and the seed SQL through PgBouncer (pool_mode = transaction)', () => {
  const schema = uniqueSchema('pgbouncer_fence');
  const q = `"${schema}"`;
  const seed = seedSql(`${q}.coordination_lease`);
  let bouncer: PgBouncerProcess;
  let pooled: pg.Pool;
  let store: PostgresLeaseStore;
  let fence: PostgresFence;
  let client: LeaseClient;

  before(async () => {
    bouncer = await startPgBouncer({ mode: 'transaction', poolSize: 3 });
    pooled = new pg.Pool({ connectionString: bouncer.url, max: 4 });
    pooled.on('error', () => undefined);
    store = new PostgresLeaseStore({
      connectionString: bouncer.url,
      schema,
      listenConnection: PG_URL,
      maxConnections: 4,
    });
    await store.migrate();
    await pooled.query(`CREATE TABLE ${q}.report (id text PRIMARY KEY, token bigint NOT NULL)`);
    fence = new PostgresFence({
      connectionString: bouncer.url,
      schema,
      leaseTable: { schema },
      timeout: '1s',
      maxConnections: 4,
    });
    await fence.migrate();
    client = new LeaseClient({ store, ownerId: 'pooled', requestTimeout: '1s' });
  });
  after(async () => {
    bouncer?.signal('SIGCONT');
    await client?.close();
    await store?.close();
    await fence?.close();
    await pooled?.end().catch(() => undefined);
    await bouncer?.stop();
    await dropSchema(schema);
  });

  const writeReport = (scope: string, token: bigint) => (tx: FenceTransaction) =>
    tx.query(
      `INSERT INTO ${q}.report (id, token) VALUES ($1, $2)
       ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token`,
      [scope, token.toString()],
    );

  it('the seed program and leasehold exclude each other through the pooler, tokens increasing', async () => {
    const key = uniqueKey('pgb-seed');
    const seedOwner = randomUUID();
    const first = await client.acquire(key, { ttl: '30s' });
    assert.equal(first.status, 'acquired');
    if (first.status !== 'acquired') return;
    // Extended protocol (bind parameters) on pooled connections, as a typical app sends it.
    const blocked = await pooled.query(seed.acquire, [key, seedOwner, '30 seconds']);
    assert.equal(blocked.rowCount, 0, 'the seed program must not take a held key');
    await first.lease.release();
    const took = await pooled.query<{ fencing_token: string }>(seed.acquire, [
      key,
      seedOwner,
      '30 seconds',
    ]);
    const seedToken = BigInt(took.rows[0]!.fencing_token);
    assert.ok(seedToken > first.lease.token);
    const busy = await client.acquire(key, { ttl: '5s' });
    assert.equal(busy.status, 'busy');
    const released = await pooled.query(seed.release, [key, seedOwner, seedToken.toString()]);
    assert.equal(released.rowCount, 1);
    const again = await client.acquire(key, { ttl: '5s' });
    assert.equal(again.status, 'acquired');
    if (again.status === 'acquired') {
      assert.ok(again.lease.token > seedToken);
      await again.lease.release();
    }
  });

  it('the fence applies, rejects stale tokens and validates the lease row through the pooler', async () => {
    const key = uniqueKey('pgb-fence');
    const a = await client.acquire(key, { ttl: '30s' });
    assert.equal(a.status, 'acquired');
    if (a.status !== 'acquired') return;
    const lease = { key, leaseId: a.lease.leaseId };
    const ok = await fence.write(
      { scope: key, token: a.lease.token, lease, idempotencyKey: 'op-1' },
      writeReport(key, a.lease.token),
    );
    assert.equal(ok.status, 'applied');
    const dup = await fence.write(
      { scope: key, token: a.lease.token, lease, idempotencyKey: 'op-1' },
      writeReport(key, a.lease.token),
    );
    assert.equal(dup.status, 'duplicate');
    await a.lease.release();
    const b = await client.acquire(key, { ttl: '30s' });
    assert.equal(b.status, 'acquired');
    if (b.status !== 'acquired') return;
    assert.equal(
      (await fence.write({ scope: key, token: b.lease.token }, writeReport(key, b.lease.token)))
        .status,
      'applied',
    );
    // A's generation is over: refused by the mark and by the lease row alike.
    const late = await fence.write({ scope: key, token: a.lease.token, lease }, () => {
      throw new Error('a stale write must never run');
    });
    assert.equal(late.status, 'stale_fence');
    if (late.status === 'stale_fence') assert.equal(late.highWaterMark, b.lease.token);
    const row = await pooled.query<{ token: string }>(
      `SELECT token::text FROM ${q}.report WHERE id = $1`,
      [key],
    );
    assert.equal(row.rows[0]?.token, b.lease.token.toString());
    await b.lease.release();
  });

  it('a stalled pooler (SIGSTOP) makes acquire answer unavailable and the fence throw within their bounds; SIGCONT recovers', async (t) => {
    t.after(() => bouncer.signal('SIGCONT'));
    const key = uniqueKey('pgb-stall');
    // Warm the pools so the stall meets open connections, not new ones.
    const warm = await client.acquire(key, { ttl: '5s' });
    assert.equal(warm.status, 'acquired');
    if (warm.status === 'acquired') await warm.lease.release();
    await fence.highWaterMark(key);

    bouncer.signal('SIGSTOP');
    let started = performance.now();
    const r = await client.acquire(key, { ttl: '5s' });
    const acquireMs = performance.now() - started;
    assert.equal(r.status, 'unavailable');
    // requestTimeout is 1 s; generous on a loaded machine, far below "forever".
    assert.ok(acquireMs < 5000, `acquire answered after ${Math.round(acquireMs)} ms`);

    started = performance.now();
    await assert.rejects(
      fence.write({ scope: key, token: 1n }, writeReport(key, 1n)),
      (err: unknown) => isLeaseholdError(err) && err.code === 'ERR_UNAVAILABLE',
    );
    const fenceMs = performance.now() - started;
    assert.ok(fenceMs < 5000, `the fence answered after ${Math.round(fenceMs)} ms`);

    bouncer.signal('SIGCONT');
    started = performance.now();
    const back = await client.acquire(key, { ttl: '5s', wait: '15s' });
    const recoverMs = performance.now() - started;
    assert.equal(back.status, 'acquired');
    if (back.status !== 'acquired') return;
    const w = await fence.write(
      { scope: key, token: back.lease.token },
      writeReport(key, back.lease.token),
    );
    assert.equal(w.status, 'applied');
    await back.lease.release();
    t.diagnostic(
      `stalled pooler: acquire unavailable after ${Math.round(acquireMs)} ms, fence after ${Math.round(fenceMs)} ms; first grant ${Math.round(recoverMs)} ms after SIGCONT`,
    );
  });
});
