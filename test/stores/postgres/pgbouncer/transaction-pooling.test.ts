import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../../src/core/client.js';
import { isLeaseholdError } from '../../../../src/core/errors.js';
import type { Logger } from '../../../../src/core/events.js';
import { PostgresLeaseStore } from '../../../../src/stores/postgres/store.js';
import { storeContractCases as contractCases } from '../../../../src/testing/store-contract/index.js';
import type { StoreHarness } from '../../../contract/harness.js';
import { uniqueKey } from '../../../support/keys.js';
import { startPgBouncer, type PgBouncerProcess } from '../../../support/pgbouncer.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../../support/postgres.js';

// PgBouncer in transaction pooling mode in front of the shared PostgreSQL: every statement of
// the store goes through the pooler (a handful of server connections shared by every store
// instance), the LISTEN session goes straight to PostgreSQL.
let bouncer: PgBouncerProcess;
const schema = uniqueSchema('pgbouncer_tx');

before(async () => {
  bouncer = await startPgBouncer({ mode: 'transaction', poolSize: 3 });
});
after(async () => {
  await bouncer?.stop();
  await dropSchema(schema);
});

function pooledStore(extra: { listen?: boolean } = {}): PostgresLeaseStore {
  return new PostgresLeaseStore({
    connectionString: bouncer.url,
    schema,
    maxConnections: 4,
    ...(extra.listen === false ? {} : { listenConnection: PG_URL }),
  });
}

describe('LeaseStore contract: postgres through PgBouncer (pool_mode = transaction, 3 server connections)', () => {
  const harness: StoreHarness = {
    name: 'postgres-pgbouncer-transaction',
    open: async () => {
      const store = pooledStore();
      await store.migrate();
      return store;
    },
    teardown: () => Promise.resolve(),
  };
  for (const c of contractCases) {
    it(c.name, { timeout: c.timeoutMs ?? 30_000 }, (t) => c.run(harness, t));
  }
});

describe('PostgreSQL store through PgBouncer transaction pooling', () => {
  it('refuses to LISTEN through the pooler, naming the pooling mode, and waiters still get the key by polling', async () => {
    const store = pooledStore({ listen: false });
    const warnings: string[] = [];
    const logger: Logger = {
      debug: () => undefined,
      info: () => undefined,
      error: () => undefined,
      warn: (fields) => warnings.push(String(fields['err'])),
    };
    const a = new LeaseClient({ store, ownerId: 'a' });
    const b = new LeaseClient({ store, ownerId: 'b', logger, pollInterval: 200 });
    try {
      await assert.rejects(
        store.watch(uniqueKey('pgb-watch'), () => undefined),
        (err: unknown) => {
          assert.ok(isLeaseholdError(err));
          assert.equal(err.code, 'ERR_UNAVAILABLE');
          assert.match(err.message, /pool_mode = transaction/);
          assert.match(err.message, /listenConnection/);
          return true;
        },
      );
      const key = uniqueKey('pgb-poll');
      const held = await a.acquire(key, { ttl: '30s' });
      assert.equal(held.status, 'acquired');
      const waiting = b.acquire(key, { ttl: '5s', wait: '20s' });
      // The waiter is polling once its watch was refused and logged.
      for (let i = 0; i < 200 && warnings.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.match(warnings[0] ?? '', /pool_mode = transaction/);
      if (held.status === 'acquired') await held.lease.release();
      const got = await waiting;
      assert.equal(got.status, 'acquired');
      if (got.status === 'acquired' && held.status === 'acquired') {
        assert.ok(got.lease.token > held.lease.token);
        await got.lease.release();
      }
    } finally {
      await a.close();
      await b.close();
      await store.close();
    }
  });

  it('keeps lock_timeout per statement: a grant blocked on a row lock fails on the server within its timeout', async () => {
    const store = pooledStore();
    const key = uniqueKey('pgb-lock');
    const direct = new pg.Client({ connectionString: PG_URL });
    direct.on('error', () => undefined);
    await direct.connect();
    try {
      // Create the row, then hold its lock from a direct session.
      const first = await store.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'x', ttlMs: 50, value: undefined },
        { timeoutMs: 5000, signal: new AbortController().signal },
      );
      assert.equal(first.status, 'acquired');
      await new Promise((r) => setTimeout(r, 100));
      await direct.query('BEGIN');
      await direct.query(
        `SELECT 1 FROM "${schema}".coordination_lease WHERE resource_key = $1 FOR UPDATE`,
        [key],
      );
      const started = performance.now();
      await assert.rejects(
        store.tryAcquire(
          { key, leaseId: randomUUID(), ownerId: 'y', ttlMs: 1000, value: undefined },
          { timeoutMs: 300, signal: new AbortController().signal },
        ),
        (err: unknown) => {
          assert.ok(isLeaseholdError(err));
          assert.equal(err.code, 'ERR_UNAVAILABLE');
          // lock_not_available or query_canceled: raised by PostgreSQL, so the SET LOCAL
          // that bounds the statement reached the same server connection as the grant.
          assert.match(err.message, /\[(55P03|57014)\]/);
          return true;
        },
      );
      const took = performance.now() - started;
      assert.ok(took < 5000, `the blocked grant answered after ${Math.round(took)} ms`);
    } finally {
      await direct.query('ROLLBACK').catch(() => undefined);
      await direct.end().catch(() => undefined);
      await store.close();
    }
  });
});
