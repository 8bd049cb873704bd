import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import type { LeaseStore, Unwatch } from '../../src/core/store.js';
import { RedisLeaseStore } from '../../src/stores/redis/store.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { eventually } from '../support/time.js';

describe('Redis release subscriber reconnect', () => {
  let server: RedisProcess | undefined;
  after(async () => {
    await server?.stop();
  });

  it('wakes waiters after its connection was cut, so a release published meanwhile is not missed', async () => {
    server = await startRedis();
    const admin = server.admin();
    const a = new RedisLeaseStore({ redis: server.url });
    const b = new RedisLeaseStore({ redis: server.url });
    let watches = 0;
    const spy: LeaseStore = Object.create(b) as LeaseStore;
    Object.assign(spy, {
      watch: async (k: string, fn: () => void): Promise<Unwatch> => {
        const u = await b.watch(k, fn);
        watches++;
        return u;
      },
    });
    const holder = new LeaseClient({ store: a, ownerId: 'holder' });
    // Neither the poll (60 s) nor the holder's expiry (60 s) can explain a quick wake-up.
    const waiter = new LeaseClient({ store: spy, ownerId: 'waiter', pollInterval: 60_000 });
    try {
      const held = await holder.acquire('k', { ttl: 60_000 });
      assert.equal(held.status, 'acquired');
      const waiting = waiter.acquire('k', { ttl: 5000, wait: 30_000 });
      await eventually('the waiter to subscribe', () => (watches === 1 ? true : undefined));
      const killed = Number(await admin.client('KILL', 'TYPE', 'pubsub'));
      assert.equal(killed, 1, 'the subscriber connection was cut');
      // Published while the subscriber is away: nobody receives it.
      assert.equal((await held.lease.release()).status, 'released');
      const started = performance.now();
      const r = await waiting;
      assert.equal(r.status, 'acquired');
      const took = performance.now() - started;
      assert.ok(took < 10_000, `the waiter took ${took.toFixed(0)}ms to notice`);
      await r.lease.release();
    } finally {
      await holder.close();
      await waiter.close();
      await a.close();
      await b.close();
      admin.disconnect();
    }
  });
});
