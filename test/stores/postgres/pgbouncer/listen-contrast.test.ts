import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { isLeaseholdError } from '../../../../src/core/errors.js';
import { PostgresLeaseStore } from '../../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../../support/keys.js';
import { startPgBouncer, type PgBouncerProcess } from '../../../support/pgbouncer.js';
import { dropSchema, uniqueSchema, withPgClient } from '../../../support/postgres.js';
import { eventually } from '../../../support/time.js';

// Why the store never listens through a pooler: plain LISTEN/NOTIFY through PgBouncer, in
// session mode (works) and in transaction mode (the notification is dropped by the pooler).
describe('LISTEN through PgBouncer: session pooling delivers, transaction pooling drops', () => {
  let session: PgBouncerProcess;
  let transaction: PgBouncerProcess;
  const clients: pg.Client[] = [];

  before(async () => {
    [session, transaction] = await Promise.all([
      startPgBouncer({ mode: 'session' }),
      // One server connection, so the listener's is the one the notification reaches.
      startPgBouncer({ mode: 'transaction', poolSize: 1 }),
    ]);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    await Promise.all([session?.stop(), transaction?.stop()]);
  });

  async function listenVia(url: string, channel: string) {
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => undefined);
    clients.push(c);
    const got: string[] = [];
    c.on('notification', (m) => got.push(m.payload ?? ''));
    await c.connect();
    await c.query(`LISTEN ${channel}`);
    return { c, got };
  }

  it('session mode: a NOTIFY from another session arrives', async () => {
    const channel = `lh_contrast_${randomBytes(4).toString('hex')}`;
    const { got } = await listenVia(session.url, channel);
    await withPgClient((d) => d.query(`NOTIFY ${channel}, 'hello'`));
    await eventually('the notification through session pooling', () =>
      got.includes('hello') ? true : undefined,
    );
  });

  it('transaction mode: the NOTIFY reaches the listening server connection while no client holds it, and the pooler drops it', async () => {
    const channel = `lh_contrast_${randomBytes(4).toString('hex')}`;
    const { c, got } = await listenVia(transaction.url, channel);
    await withPgClient((d) => d.query(`NOTIFY ${channel}, 'hello'`));
    // The pooler says so itself: the notification reached an idle server connection.
    await eventually(
      "pgbouncer's report of the dropped notification",
      () =>
        /got packet 'A' from server when not linked/.test(transaction.log()) ? true : undefined,
      { timeoutMs: 15_000 },
    );
    // The server connection still listens (the next transaction runs on it), yet the
    // notification is gone for good: a query through it brings nothing.
    const r = await c.query<{ ch: string }>('SELECT pg_listening_channels() AS ch');
    assert.deepEqual(
      r.rows.map((x) => x.ch),
      [channel],
    );
    assert.deepEqual(got, [], 'the client never saw the notification');
  });

  it('the store refuses to listen through either mode: the client side cannot tell them apart', async () => {
    const schema = uniqueSchema('pgbouncer_session');
    const store = new PostgresLeaseStore({ connectionString: session.url, schema });
    try {
      await store.migrate();
      await assert.rejects(
        store.watch(uniqueKey('pgb-session'), () => undefined),
        (err: unknown) =>
          isLeaseholdError(err) &&
          err.code === 'ERR_UNAVAILABLE' &&
          /listenConnection/.test(err.message),
      );
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });
});
