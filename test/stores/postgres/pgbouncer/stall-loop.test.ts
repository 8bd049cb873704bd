import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../../src/core/client.js';
import { PostgresFence } from '../../../../src/fencing/postgres.js';
import { PostgresLeaseStore } from '../../../../src/stores/postgres/store.js';
import { CHAOS } from '../../../support/fault-env.js';
import { uniqueKey } from '../../../support/keys.js';
import { startPgBouncer, type PgBouncerProcess } from '../../../support/pgbouncer.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../../support/postgres.js';
import { elapse } from '../../../support/time.js';

// Writers under one key keep writing to a resource database behind a PgBouncer (transaction
// pooling) that is stopped longer than the TTL and resumed, again and again, while the lease
// table stays reachable through a second PgBouncer. Leases expire during a stall and others
// are granted; writes held in the stalled pooler arrive late, after newer ones were sent: the
// fence must keep the resource's accepted tokens in order.
const CYCLES = CHAOS ? 20 : 2;
const WRITERS = 3;
const TTL_MS = 1000;
const STALL_MS = 1500;
const RUN_MS = 1500;

describe(`PgBouncer stalls during a write load (${CYCLES} SIGSTOP/SIGCONT cycles)`, () => {
  const schema = uniqueSchema('pgbouncer_stall');
  const q = `"${schema}"`;
  let bouncer: PgBouncerProcess;
  let leaseBouncer: PgBouncerProcess;
  let admin: pg.Client;

  before(async () => {
    [bouncer, leaseBouncer] = await Promise.all([
      startPgBouncer({ mode: 'transaction', poolSize: 3 }),
      startPgBouncer({ mode: 'transaction', poolSize: 3 }),
    ]);
    admin = new pg.Client({ connectionString: PG_URL });
    admin.on('error', () => undefined);
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${q}`);
    await admin.query(
      `CREATE TABLE ${q}.write_log (seq bigserial PRIMARY KEY, token bigint NOT NULL, writer int NOT NULL)`,
    );
  });
  after(async () => {
    bouncer?.signal('SIGCONT');
    await admin?.end().catch(() => undefined);
    await Promise.all([bouncer?.stop(), leaseBouncer?.stop()]);
    await dropSchema(schema);
  });

  it(
    'accepted tokens never go backwards, every cycle recovers, figures reported',
    { timeout: CHAOS ? 1_800_000 : 120_000 },
    async (t) => {
      t.after(() => bouncer.signal('SIGCONT'));
      const key = uniqueKey('pgb-stall-loop');
      const stores = Array.from(
        { length: WRITERS },
        () =>
          new PostgresLeaseStore({
            connectionString: leaseBouncer.url,
            listenConnection: PG_URL,
            schema,
            maxConnections: 2,
          }),
      );
      const fences = Array.from(
        { length: WRITERS },
        () =>
          new PostgresFence({
            connectionString: bouncer.url,
            schema,
            timeout: '500ms',
            maxConnections: 2,
          }),
      );
      await stores[0]!.migrate();
      await fences[0]!.migrate();
      const clients = stores.map(
        (store, i) => new LeaseClient({ store, ownerId: `w${i}`, requestTimeout: '500ms' }),
      );
      const f = { grants: 0, attempted: 0, staleAttempted: 0, applied: 0, rejected: 0, errors: 0 };
      let highestGranted = 0n;
      let lastAppliedAt = 0;
      let stop = false;
      const writer = async (i: number): Promise<void> => {
        while (!stop) {
          const r = await clients[i]!.acquire(key, {
            ttl: TTL_MS,
            wait: 2000,
            // Not renewed: a write stuck in the stalled pooler outlives its lease, and others
            // are granted meanwhile (the delayed write of a holder that lost its lease).
            autoRenew: false,
          });
          if (r.status !== 'acquired') {
            if (r.status === 'unavailable') await elapse(50);
            continue;
          }
          f.grants++;
          if (r.lease.token > highestGranted) highestGranted = r.lease.token;
          // Like a holder that keeps working: two writes under the lease, validity unchecked.
          for (let n = 0; n < 2 && !stop; n++) {
            f.attempted++;
            if (r.lease.token < highestGranted) f.staleAttempted++;
            try {
              const w = await fences[i]!.write({ scope: key, token: r.lease.token }, (tx) =>
                tx.query(`INSERT INTO ${q}.write_log (token, writer) VALUES ($1, $2)`, [
                  r.lease.token.toString(),
                  i,
                ]),
              );
              if (w.status === 'applied') {
                f.applied++;
                lastAppliedAt = performance.now();
              } else f.rejected++;
            } catch {
              f.errors++;
            }
          }
          await r.lease.release().catch(() => undefined);
        }
      };
      const running = clients.map((_, i) => writer(i));
      const recoveryMs: number[] = [];
      try {
        for (let c = 0; c < CYCLES; c++) {
          await elapse(RUN_MS);
          bouncer.signal('SIGSTOP');
          await elapse(STALL_MS);
          const resumedAt = performance.now();
          bouncer.signal('SIGCONT');
          // Every cycle recovers: a write applied after the resume, within a generous bound.
          const deadline = resumedAt + 20_000;
          while (lastAppliedAt < resumedAt && performance.now() < deadline) await elapse(20);
          assert.ok(
            lastAppliedAt >= resumedAt,
            `no write applied within 20 s of SIGCONT (cycle ${c + 1})`,
          );
          recoveryMs.push(Math.round(lastAppliedAt - resumedAt));
        }
      } finally {
        stop = true;
        bouncer.signal('SIGCONT');
        await Promise.all(running);
        await Promise.all(clients.map((c) => c.close()));
        await Promise.all([...stores, ...fences].map((s) => s.close()));
      }
      // The resource's own log, in commit order: tokens never decrease (I1).
      const log = await admin.query<{ token: string }>(
        `SELECT token::text FROM ${q}.write_log ORDER BY seq`,
      );
      const tokens = log.rows.map((r) => BigInt(r.token));
      let backwards = 0;
      for (let n = 1; n < tokens.length; n++) if (tokens[n]! < tokens[n - 1]!) backwards++;
      assert.equal(backwards, 0, 'a write with a lower token was accepted after a higher one');
      assert.ok(f.grants >= CYCLES, `grants: ${f.grants}`);
      assert.ok(tokens.length >= 1 && tokens.length <= f.attempted);
      t.diagnostic(
        `pgbouncer stall: cycles=${CYCLES} grants=${f.grants} writes_attempted=${f.attempted} ` +
          `stale_attempted=${f.staleAttempted} applied=${f.applied} rejected_stale=${f.rejected} ` +
          `errors=${f.errors} logged=${tokens.length} (committed despite an error: ${tokens.length - f.applied}) ` +
          `accepted_backwards=${backwards} ` +
          `recovery_ms=${recoveryMs.join(',')}`,
      );
    },
  );
});
