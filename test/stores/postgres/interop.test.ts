import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseClient } from '../../../src/core/client.js';
import type { Lease } from '../../../src/core/lease.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { eventually } from '../../support/time.js';

// The seed's statements (000_239fd4fe4243a931.txt §4), copied literally. The raw client's
// search_path points at the test schema, so the table name needs no substitution.
const SEED_ACQUIRE = `
INSERT INTO coordination_lease
(resource_key, owner_id, lease_until, fencing_token)
VALUES
($1, $2, clock_timestamp() + $3::interval, 1)
ON CONFLICT (resource_key) DO UPDATE
SET owner_id = EXCLUDED.owner_id,
lease_until = clock_timestamp() + $3::interval,
fencing_token = coordination_lease.fencing_token + 1
WHERE coordination_lease.lease_until <= clock_timestamp()
RETURNING fencing_token, lease_until;`;

const SEED_RENEW = `
UPDATE coordination_lease
SET lease_until = clock_timestamp() + $4::interval
WHERE resource_key = $1
AND owner_id = $2
AND fencing_token = $3
AND lease_until > clock_timestamp()
RETURNING lease_until;`;

const SEED_RELEASE = `
UPDATE coordination_lease
SET owner_id = NULL,
lease_until = '-infinity'::timestamptz
WHERE resource_key = $1
AND owner_id = $2
AND fencing_token = $3;`;

/** Another program that speaks only the seed's SQL. */
class SeedProgram {
  constructor(private readonly c: pg.Client) {}
  async acquire(key: string, ownerId: string, ttl: string): Promise<bigint | undefined> {
    const r = await this.c.query<{ fencing_token: string }>(SEED_ACQUIRE, [key, ownerId, ttl]);
    return r.rows[0] === undefined ? undefined : BigInt(r.rows[0].fencing_token);
  }
  async renew(key: string, ownerId: string, token: bigint, ttl: string): Promise<boolean> {
    const r = await this.c.query(SEED_RENEW, [key, ownerId, token.toString(), ttl]);
    return r.rowCount === 1;
  }
  async release(key: string, ownerId: string, token: bigint): Promise<boolean> {
    const r = await this.c.query(SEED_RELEASE, [key, ownerId, token.toString()]);
    return r.rowCount === 1;
  }
}

describe("interoperation with the seed's own statements on the same table", () => {
  const schema = uniqueSchema('interop');
  let store: PostgresLeaseStore;
  let raw: pg.Client;
  let seed: SeedProgram;

  before(async () => {
    store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 4 });
    await store.migrate();
    raw = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${schema}` });
    await raw.connect();
    seed = new SeedProgram(raw);
  });
  after(async () => {
    await raw?.end();
    await store?.close();
    await dropSchema(schema);
  });

  it('excludes each other and keeps tokens increasing whichever side acquires', async () => {
    const client = new LeaseClient({ store, ownerId: 'leasehold-a' });
    const key = uniqueKey('interop');
    const seedOwner = randomUUID();

    // Seed first: leasehold sees a busy key held by a holder it knows nothing about.
    const t1 = await seed.acquire(key, seedOwner, '30 seconds');
    assert.equal(t1, 1n);
    const busy = await client.acquire(key, { ttl: 5000 });
    assert.equal(busy.status, 'busy');
    if (busy.status === 'busy') {
      assert.equal(busy.holder.token, t1);
      assert.equal(busy.holder.ownerId, '', 'a seed holder has no leasehold name');
      assert.equal(busy.holder.leaseIdPrefix, seedOwner.slice(0, 8));
    }
    assert.equal(await seed.renew(key, seedOwner, t1, '30 seconds'), true);
    assert.equal(await seed.release(key, seedOwner, t1), true);

    // leasehold next; the seed program is refused and its stale renew / release do nothing.
    const a = await client.acquire(key, { ttl: 30_000, value: 'leader:a' });
    assert.equal(a.status, 'acquired');
    const la = (a as { lease: Lease }).lease;
    assert.ok(la.token > t1);
    assert.equal(await seed.acquire(key, randomUUID(), '30 seconds'), undefined);
    assert.equal(await seed.renew(key, seedOwner, t1, '30 seconds'), false);
    assert.equal(await seed.release(key, seedOwner, t1), false);
    assert.equal((await client.inspect(key)).holder?.token, la.token);
    // The lease id is the row's owner_id: the seed's renew works on a leasehold lease.
    assert.equal(await seed.renew(key, la.leaseId, la.token, '30 seconds'), true);
    assert.equal((await la.release()).status, 'released');

    // The seed takes the key again, over a row leasehold left with details: they are not
    // shown for the new holder.
    const seedOwner2 = randomUUID();
    const t3 = await seed.acquire(key, seedOwner2, '300 milliseconds');
    assert.ok(t3 !== undefined && t3 > la.token, `seed token ${t3} after ${la.token}`);
    const busy2 = await client.acquire(key, { ttl: 5000 });
    assert.equal(busy2.status, 'busy');
    if (busy2.status === 'busy') {
      assert.equal(busy2.holder.ownerId, '');
      assert.equal(busy2.holder.value, undefined);
    }

    // The seed holder expires without releasing: leasehold takes over by the store clock.
    const b = await eventually('leasehold to take over the expired seed lease', async () => {
      const r = await client.acquire(key, { ttl: 30_000 });
      return r.status === 'acquired' ? r.lease : undefined;
    });
    assert.ok(b.token > t3);
    assert.equal(await seed.renew(key, seedOwner2, t3, '30 seconds'), false, 'no revival');
    await b.release();
    await client.close();
  });

  it("wakes a leasehold waiter when the seed program releases (the table's trigger notifies)", async () => {
    // A transparent view of the real store that counts subscriptions and busy answers.
    let watches = 0;
    let busyAnswers = 0;
    const spy = Object.create(store) as PostgresLeaseStore;
    Object.assign(spy, {
      tryAcquire: async (...args: Parameters<PostgresLeaseStore['tryAcquire']>) => {
        const r = await store.tryAcquire(...args);
        if (r.status === 'busy') busyAnswers++;
        return r;
      },
      watch: async (...args: Parameters<PostgresLeaseStore['watch']>) => {
        const u = await store.watch(...args);
        watches++;
        return u;
      },
    });
    const client = new LeaseClient({ store: spy, ownerId: 'waiter', pollInterval: 60_000 });
    const key = uniqueKey('seedwake');
    const owner = randomUUID();
    const t = await seed.acquire(key, owner, '60 seconds');
    assert.ok(t !== undefined);
    const waiting = client.acquire(key, { ttl: 5000, wait: 30_000 });
    // Parked: subscribed, then re-checked once more and found busy.
    await eventually('the waiter to park', () =>
      watches === 1 && busyAnswers >= 2 ? true : undefined,
    );
    const releasedAt = performance.now();
    assert.equal(await seed.release(key, owner, t), true);
    const r = await waiting;
    const took = performance.now() - releasedAt;
    assert.equal(r.status, 'acquired');
    // Neither the 60 s poll nor the 60 s TTL could explain this.
    assert.ok(took < 5000, `woke ${took.toFixed(0)}ms after the seed's release`);
    if (r.status === 'acquired') {
      assert.ok(r.lease.token > t);
      await r.lease.release();
    }
    await client.close();
  });

  it('keeps exclusion and strictly increasing tokens when both sides contend in a loop', async () => {
    const client = new LeaseClient({ store, ownerId: 'loop-a' });
    const key = uniqueKey('loop');
    const grants: Array<{ side: string; token: bigint }> = [];
    let inside = 0;
    let maxInside = 0;
    const enter = (side: string, token: bigint): void => {
      inside++;
      maxInside = Math.max(maxInside, inside);
      grants.push({ side, token });
    };
    // Both sides try until each has won `wins` times (bounded by attempts). A fixed number
    // of rounds per side let the outcome ride on relative speed: on a slow disk the seed's
    // refused upsert still locks the row and waits for its commit, while leasehold's busy
    // answer writes nothing, so leasehold could spend all its rounds during a few seed holds.
    const wins = 15;
    const maxAttempts = 20_000;
    const won = (side: string): number => grants.filter((g) => g.side === side).length;
    const done = (): boolean => won('seed') >= wins && won('leasehold') >= wins;
    const leaseholdSide = async (): Promise<void> => {
      for (let i = 0; i < maxAttempts && !done(); i++) {
        const r = await client.acquire(key, { ttl: 10_000 });
        if (r.status !== 'acquired') continue;
        enter('leasehold', r.lease.token);
        await new Promise((res) => setImmediate(res));
        inside--;
        await r.lease.release();
      }
    };
    const seedSide = async (): Promise<void> => {
      for (let i = 0; i < maxAttempts && !done(); i++) {
        const owner = randomUUID();
        const t = await seed.acquire(key, owner, '10 seconds');
        if (t === undefined) continue;
        enter('seed', t);
        await new Promise((res) => setImmediate(res));
        inside--;
        assert.equal(await seed.release(key, owner, t), true);
      }
    };
    await Promise.all([leaseholdSide(), seedSide()]);
    assert.equal(maxInside, 1, 'both sides held the key at once');
    assert.ok(
      done(),
      `both sides must win ${wins} times: seed ${won('seed')}, leasehold ${won('leasehold')}`,
    );
    for (let i = 1; i < grants.length; i++) {
      assert.ok(
        grants[i]!.token > grants[i - 1]!.token,
        `grant ${i} (${grants[i]!.side}) token ${grants[i]!.token} after ${grants[i - 1]!.token}`,
      );
    }
    await client.close();
  });
});
