import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LeaseClient } from '../../src/core/client.js';
import { Election } from '../../src/core/election.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { tempDir } from '../support/tmp.js';

// A new leader claims its epoch on the listed fences before `campaign` answers elected (claim
// before start, DESIGN §4–5): the old leader's late write is refused there even though the new
// leader has written nothing yet; without the claim it lands. A fence that already saw a newer
// epoch turns the election into `claim_failed`, and the leadership is given back.

function setup() {
  const tmp = tempDir('election-claim');
  const db = new Database(join(tmp.dir, 'resource.db'));
  db.exec('CREATE TABLE config (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
  const fence = new SqliteFence({ database: db });
  const put = (epoch: bigint, body: string) =>
    fence.apply('config/main', epoch, (d) =>
      d.prepare('INSERT OR REPLACE INTO config (id, body) VALUES (?, ?)').run('main', body),
    );
  const body = () =>
    (db.prepare('SELECT body FROM config WHERE id = ?').get('main') as { body: string } | undefined)
      ?.body;
  const state = new MemoryLeaseState();
  const clients: LeaseClient[] = [];
  const election = (owner: string) => {
    const client = new LeaseClient({ store: new MemoryLeaseStore({ state }), ownerId: owner });
    clients.push(client);
    return new Election({ client, name: 'config-writer', ttl: '10s' });
  };
  const close = async () => {
    for (const c of clients) await c.close();
    db.close();
    tmp.remove();
  };
  return { fence, put, body, election, close };
}

describe('election: a new leader claims its epoch on its fences', () => {
  for (const claim of [true, false]) {
    it(
      claim
        ? "with fences: the old leader's late write is refused before the new leader wrote"
        : "control, no fences: the old leader's late write lands",
      async () => {
        const r = setup();
        try {
          const a = await r.election('a').campaign();
          assert.equal(a.status, 'elected');
          if (a.status !== 'elected') return;
          const old = a.leadership.epoch;
          assert.equal(r.put(old, 'A1').status, 'applied');
          // A is paused here with its write ready; its leadership ends (resigned for the test,
          // as an expiry would end it) and B is elected.
          await a.leadership.resign();
          const fences = [{ fence: r.fence, scope: 'config/main', name: 'config-db' }];
          const b = await r.election('b').campaign(claim ? { fences } : {});
          assert.equal(b.status, 'elected');
          if (b.status !== 'elected') return;
          assert.ok(b.leadership.epoch > old);
          const late = r.put(old, 'A late');
          if (claim) {
            assert.deepEqual(late, { status: 'stale_fence', highWaterMark: b.leadership.epoch });
            assert.equal(r.body(), 'A1', "A's late write did not land");
            assert.equal(r.put(b.leadership.epoch, 'B1').status, 'applied', "B's first write");
          } else {
            assert.equal(late.status, 'applied');
            assert.equal(r.body(), 'A late', 'without the claim the stale write lands');
          }
          await b.leadership.resign();
        } finally {
          await r.close();
        }
      },
    );
  }

  it('answers claim_failed and gives the leadership back when a fence already saw a newer epoch', async () => {
    const r = setup();
    try {
      assert.equal(r.fence.claim('config/main', 2n ** 62n).status, 'applied');
      const e = r.election('c');
      const res = await e.campaign({ fences: [{ fence: r.fence, scope: 'config/main' }] });
      assert.equal(res.status, 'claim_failed');
      if (res.status !== 'claim_failed') return;
      assert.equal(res.reason, 'stale_fence');
      assert.equal(res.scope, 'config/main');
      assert.equal((await e.leader()).leader, undefined, 'nobody leads after the refused claim');
    } finally {
      await r.close();
    }
  });
});
