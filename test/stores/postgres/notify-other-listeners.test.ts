import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { StoreAcquireResult, StoreRequestOptions } from '../../../src/core/store.js';
import { channelName, quoteIdent } from '../../../src/drivers/postgres/client.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { eventually } from '../../support/time.js';

// Decision 029: a store with its own pool passes its listener id with its lone grants and
// releases, and their notifications skip that listener's interest; every other listener that
// waits on the key is still notified, and a store on the caller's pool (or any older function
// or program) notifies everyone, its own listener included. A separate session LISTENs on the
// store's channel; notifications reach it in commit order, so "nothing was sent" is checked
// by a marker notified after the statements in question, never by waiting for a time.

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

function ask(key: string, leaseId = randomUUID()) {
  return { key, leaseId, ownerId: 'notify-others', ttlMs: 60_000, value: undefined };
}

function tokenOf(r: StoreAcquireResult): bigint {
  assert.equal(r.status, 'acquired');
  return (r as { token: bigint }).token;
}

describe('PostgresLeaseStore notifies only other listeners of its own changes (decision 029)', () => {
  const schema = uniqueSchema('notifyothers');
  const channel = channelName(schema, 'coordination_lease');
  let mine: PostgresLeaseStore;
  let other: PostgresLeaseStore;
  let spy: pg.Client;
  let pool: pg.Pool;
  const heard: string[] = [];

  before(async () => {
    mine = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    await mine.migrate();
    other = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    pool.on('error', () => undefined);
    spy = new pg.Client({ connectionString: PG_URL });
    spy.on('error', () => undefined);
    await spy.connect();
    spy.on('notification', (n) => {
      if (n.channel === channel && n.payload !== undefined) heard.push(n.payload);
    });
    await spy.query(`LISTEN ${quoteIdent(channel)}`);
  });
  after(async () => {
    await mine?.close();
    await other?.close();
    await pool?.end();
    await spy?.end();
    await dropSchema(schema);
  });

  /** Every payload heard before a marker notified now (so after everything committed before). */
  async function heardUpToNow(): Promise<string[]> {
    const marker = `marker-${randomUUID()}`;
    await spy.query(`SELECT pg_notify($1, $2)`, [channel, marker]);
    await eventually('the marker notification', () => (heard.includes(marker) ? true : undefined));
    const upTo = heard.splice(0, heard.indexOf(marker) + 1);
    return upTo.slice(0, -1);
  }

  it('sends nothing for a key only its own listener waits on, and still wakes its own watcher once', async () => {
    const key = uniqueKey('alone');
    let wakes = 0;
    let grants = 0;
    const unwatch = await mine.watch(key, (change) => {
      if (change === 'granted') grants++;
      else wakes++;
    });
    try {
      await heardUpToNow();
      const a = ask(key);
      const t = tokenOf(await mine.tryAcquire(a, OPTS()));
      assert.equal(
        (await mine.release({ key, leaseId: a.leaseId, token: t }, OPTS())).status,
        'released',
      );
      assert.deepEqual(await heardUpToNow(), [], 'neither the grant nor the release notified');
      assert.equal(grants, 1, 'the grant was told from its answer');
      assert.equal(wakes, 1, 'the release was told from its answer');
    } finally {
      unwatch();
    }
  });

  it("notifies a key another store's listener waits on, and that store's watcher wakes", async () => {
    const key = uniqueKey('shared');
    let mineWakes = 0;
    let otherWakes = 0;
    const unwatchMine = await mine.watch(key, (change) => {
      if (change !== 'granted') mineWakes++;
    });
    const unwatchOther = await other.watch(key, (change) => {
      if (change !== 'granted') otherWakes++;
    });
    try {
      await heardUpToNow();
      const a = ask(key);
      const t = tokenOf(await mine.tryAcquire(a, OPTS()));
      await mine.release({ key, leaseId: a.leaseId, token: t }, OPTS());
      assert.deepEqual(await heardUpToNow(), [`\u0001${key}`, key], 'the grant and the release');
      await eventually("the other store's watcher to wake", () =>
        otherWakes === 1 ? true : undefined,
      );
      assert.equal(mineWakes, 1, 'our own watcher woke once, from the answer');
    } finally {
      unwatchMine();
      unwatchOther();
    }
  });

  it('sends nothing for batched grants and releases and for a hand-off when only its own listener waits', async () => {
    const keys = [uniqueKey('batch-a'), uniqueKey('batch-b'), uniqueKey('batch-c')];
    const sent: string[] = [];
    const own = (mine as unknown as { pool: { query: (t: string) => Promise<unknown> } }).pool;
    const query = own.query.bind(own);
    own.query = (text: string) => {
      sent.push(text);
      return query(text);
    };
    let wakes = 0;
    const unwatch = await Promise.all(
      keys.map((k) => mine.watch(k, (change) => (change === 'granted' ? undefined : wakes++))),
    );
    try {
      await heardUpToNow();
      // Asked in one turn: the first goes alone, the others together when it answers.
      const asks = keys.map((k) => ask(k));
      const tokens = (await Promise.all(asks.map((a) => mine.tryAcquire(a, OPTS())))).map(tokenOf);
      const released = await Promise.all(
        asks.map((a, i) =>
          mine.release({ key: a.key, leaseId: a.leaseId, token: tokens[i]! }, OPTS()),
        ),
      );
      assert.deepEqual(
        released.map((r) => r.status),
        ['released', 'released', 'released'],
      );
      assert.ok(
        sent.some((t) => t.includes('unnest(') && t.includes('_grant_notice')),
        'some grants went out in one batch',
      );
      assert.ok(
        sent.some((t) => t.includes("lease_until = '-infinity'") && t.includes('unnest(')),
        'some releases went out in one batch',
      );
      // A hand-off: the release and the next grant of one key in one transaction.
      const next = ask(keys[0]!);
      const first = ask(keys[0]!);
      const t1 = tokenOf(await mine.tryAcquire(first, OPTS()));
      const handed = await mine.releaseAndAcquire(
        { key: first.key, leaseId: first.leaseId, token: t1 },
        next,
        OPTS(),
      );
      assert.equal(handed.released, 'released');
      assert.equal(handed.acquired.status, 'acquired');
      assert.deepEqual(await heardUpToNow(), [], 'no batch and no hand-off notified');
      assert.equal(wakes, 3, 'each release woke its watcher once, from the answer');
    } finally {
      own.query = query;
      for (const u of unwatch) u();
    }
  });

  it("notifies its own listener when it runs on the caller's pool", async () => {
    const shared = new PostgresLeaseStore({ pool, schema });
    const key = uniqueKey('caller-pool');
    let wakes = 0;
    const unwatch = await shared.watch(key, (change) => {
      if (change !== 'granted') wakes++;
    });
    try {
      await heardUpToNow();
      const a = ask(key);
      const t = tokenOf(await shared.tryAcquire(a, OPTS()));
      await shared.release({ key, leaseId: a.leaseId, token: t }, OPTS());
      assert.deepEqual(await heardUpToNow(), [`\u0001${key}`, key]);
      await eventually('the notification to wake the watcher', () =>
        wakes === 1 ? true : undefined,
      );
    } finally {
      unwatch();
      await shared.close();
    }
  });

  it('still wakes its watcher for a release by the functions of version 5 (older clients)', async () => {
    const key = uniqueKey('older');
    let wakes = 0;
    const unwatch = await mine.watch(key, (change) => {
      if (change !== 'granted') wakes++;
    });
    try {
      await heardUpToNow();
      const lease = `${quoteIdent(schema)}.${quoteIdent('coordination_lease')}`;
      const grant = `${quoteIdent(schema)}.${quoteIdent('coordination_lease_grant')}`;
      const release = `${quoteIdent(schema)}.${quoteIdent('coordination_lease_release')}`;
      const id = randomUUID();
      const answer = (
        await spy.query<{ answer: string }>(
          `SELECT answer FROM ${grant}($1, $2::uuid, 60000, 'older', NULL, 1, 5000, 'on')`,
          [key, id],
        )
      ).rows[0]!.answer;
      const token = answer.split(' ')[1]!;
      const done = await spy.query<{ r: boolean }>(
        `SELECT ${release}($1, $2::uuid, $3::bigint, 5000, 'off') AS r`,
        [key, id, token],
      );
      assert.equal(done.rows[0]?.r, true);
      assert.deepEqual(await heardUpToNow(), [`\u0001${key}`, key]);
      await eventually('the older release to wake the watcher', () =>
        wakes === 1 ? true : undefined,
      );
      const row = await spy.query<{ owner_id: string | null }>(
        `SELECT owner_id FROM ${lease} WHERE resource_key = $1`,
        [key],
      );
      assert.equal(row.rows[0]?.owner_id, null);
    } finally {
      unwatch();
    }
  });
});
