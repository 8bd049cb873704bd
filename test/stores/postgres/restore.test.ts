import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../src/core/client.js';
import type { Lease } from '../../../src/core/lease.js';
import type { AcquireResult } from '../../../src/core/results.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import { quoteIdent } from '../../../src/drivers/postgres/client.js';
import { advancePostgresFencingEpoch } from '../../../src/stores/postgres/epoch.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';

function leaseOf(r: AcquireResult): Lease {
  assert.equal(r.status, 'acquired', `expected acquired, got ${r.status}`);
  return (r as { lease: Lease }).lease;
}

describe('restore from an old backup, then advance the fencing epoch', () => {
  const leases = uniqueSchema('restore_lease');
  const resource = uniqueSchema('restore_res');
  const tmp = tempDir('pg-restore');
  let store: PostgresLeaseStore;
  let fence: PostgresFence;
  let client: LeaseClient;
  let admin: pg.Client;

  before(async () => {
    store = new PostgresLeaseStore({
      connectionString: PG_URL,
      schema: leases,
      maxConnections: 2,
    });
    await store.migrate();
    fence = new PostgresFence({ connectionString: PG_URL, schema: resource, maxConnections: 2 });
    await fence.migrate();
    client = new LeaseClient({ store, ownerId: 'restorer' });
    admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
  });
  after(async () => {
    await client?.close();
    await store?.close();
    await fence?.close();
    await admin?.end();
    await dropSchema(leases);
    await dropSchema(resource);
    tmp.remove();
  });

  /** Acquires, writes through the fence under the token, releases. */
  async function grantAndWrite(key: string): Promise<{ token: bigint; status: string }> {
    const lease = leaseOf(await client.acquire(key, { ttl: 10_000 }));
    const r = await fence.write({ scope: key, token: lease.token }, () => undefined);
    await lease.release();
    return { token: lease.token, status: r.status };
  }

  it('after the epoch every new token exceeds every token issued before the restore, and the fenced resource accepts the new owner', async () => {
    const url = new URL(PG_URL);
    const pgArgs = ['-h', url.hostname, '-p', url.port || '5432', '-U', url.username];
    const db = url.pathname.slice(1);
    const key1 = 'jobs/reconcile';
    const key2 = 'jobs/born-after-backup';
    const key3 = 'jobs/held-during-backup';

    assert.deepEqual(await grantAndWrite(key1), { token: 1n, status: 'applied' });
    assert.deepEqual(await grantAndWrite(key1), { token: 2n, status: 'applied' });
    const held = leaseOf(await client.acquire(key3, { ttl: 60_000, autoRenew: false }));

    const dump = join(tmp.dir, 'leases.dump');
    execFileSync('pg_dump', [...pgArgs, '-d', db, '-n', leases, '-Fc', '-f', dump]);

    // Life goes on after the backup: more grants, a new key, and the resource sees them all.
    await held.release();
    const issuedAfterBackup: bigint[] = [];
    for (let i = 0; i < 4; i++) {
      const g = await grantAndWrite(key1);
      assert.equal(g.status, 'applied');
      issuedAfterBackup.push(g.token);
    }
    issuedAfterBackup.push((await grantAndWrite(key2)).token);
    issuedAfterBackup.push((await grantAndWrite(key2)).token);
    const highestKey1 = issuedAfterBackup[3]!;
    assert.equal(highestKey1, 6n);
    assert.equal(await fence.highWaterMark(key1), 6n);

    // Disaster: the lease schema is restored from the old backup.
    await admin.query(`DROP SCHEMA ${quoteIdent(leases)} CASCADE`);
    execFileSync('pg_restore', [...pgArgs, '-d', db, dump]);
    assert.equal((await client.inspect(key1)).lastToken, 2n, 'the restore lost tokens 3…6');

    // Control arm: without the epoch the store hands out a token the resource has already
    // passed — the resource's fence catches it.
    const repeated = leaseOf(await client.acquire(key1, { ttl: 10_000 }));
    assert.ok(repeated.token <= highestKey1, `token ${repeated.token} repeats history`);
    const refused = await fence.write({ scope: key1, token: repeated.token }, () => undefined);
    assert.deepEqual(refused, { status: 'stale_fence', highWaterMark: 6n });

    const before = BigInt(Date.now()) * 1024n;
    const epoch = await advancePostgresFencingEpoch({
      connectionString: PG_URL,
      schema: leases,
    });
    assert.ok(epoch.floor >= before - 60_000n * 1024n, `floor ${epoch.floor} tracks the clock`);
    assert.ok(epoch.floor < 2n ** 62n);
    assert.ok(epoch.rowsRaised >= 2);

    // Leases from before the epoch are void: their tokens no longer match the rows.
    assert.equal((await repeated.renew()).status, 'lost');
    assert.equal((await held.renew()).status, 'lost');

    const everyEarlier = [1n, 2n, held.token, repeated.token, ...issuedAfterBackup];
    const maxEarlier = everyEarlier.reduce((a, b) => (a > b ? a : b));
    for (const key of [key1, key2, key3]) {
      const g = await grantAndWrite(key);
      assert.ok(g.token > maxEarlier, `${key}: token ${g.token} must exceed ${maxEarlier}`);
      assert.equal(g.status, 'applied', `${key}: the resource accepts the new owner`);
    }
    // A key the restored table never had, inserted by a program using the seed's literal 1.
    const raw = await admin.query<{ fencing_token: string }>(
      `INSERT INTO ${quoteIdent(leases)}.coordination_lease (resource_key, owner_id, lease_until, fencing_token)
       VALUES ($1, $2, clock_timestamp() + interval '1 second', 1)
       ON CONFLICT (resource_key) DO NOTHING RETURNING fencing_token`,
      ['jobs/seed-program', randomUUID()],
    );
    assert.equal(BigInt(raw.rows[0]!.fencing_token), epoch.floor + 1n);

    // Running it again is harmless: the floor only grows, tokens keep increasing.
    const last = (await client.inspect(key1)).lastToken;
    const again = await advancePostgresFencingEpoch({ connectionString: PG_URL, schema: leases });
    assert.ok(again.floor >= last);
    const g = await grantAndWrite(key1);
    assert.ok(g.token > last);
    assert.equal(g.status, 'applied');
  });
});
