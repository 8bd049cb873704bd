import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { uniqueKey, elapse, eventually } from '../../kit/wait.js';
import { shortTtl, OPTS, client, leaseOf, busyOf, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: renewal, loss and conditional release. */
export const renewReleaseCases: StoreContractCase[] = [
  {
    name: 'renew extends the lease at the store',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('renew');
        // Remaining time is reported at the store's TTL granularity: wait long enough to see
        // the difference a renewal makes, with a TTL that leaves the renewal time to arrive
        // on a loaded machine (a 3 s TTL after a 2 s wait was lost before it got there).
        const waitMs = Math.max(500, 2 * s1!.capabilities.ttlGranularityMs);
        const ttl = Math.max(3000, 3 * waitMs);
        const lease = leaseOf(await a.acquire(key, { ttl, autoRenew: false }));
        await elapse(waitMs);
        const before = busyOf(await b.acquire(key, { ttl })).holder.remainingMs;
        const deadlineBefore = lease.deadline;
        const renewed = await lease.renew();
        assert.equal(renewed.status, 'renewed');
        assert.ok(lease.deadline > deadlineBefore, 'the local deadline moves forward');
        const after = busyOf(await b.acquire(key, { ttl })).holder.remainingMs;
        assert.ok(
          after > before,
          `remaining time after renew (${after}ms) must exceed before (${before}ms)`,
        );
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a renewal after expiry is lost and stays lost, even when nobody took the key',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('lost');
        const ttl = shortTtl(s!, 200);
        const lease = leaseOf(await a.acquire(key, { ttl, autoRenew: false }));
        await elapse(ttl * 2.25);
        const ref = { key, leaseId: lease.leaseId, token: lease.token, ttlMs: 5000 };
        assert.equal(
          (await s!.renew(ref, OPTS())).status,
          'lost',
          'the store must not revive an expired lease',
        );
        assert.equal((await s!.renew(ref, OPTS())).status, 'lost', 'lost is final');
        assert.equal((await lease.renew()).status, 'lost');
        assert.equal(lease.status, 'lost');
        assert.equal(lease.signal.aborted, true);
        const state = await s!.inspect(key, OPTS());
        assert.equal(state.holder, undefined, 'no live holder after expiry');
        const next = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.ok(next.token > lease.token, 'reacquisition makes a new, greater token');
        await next.release();
        await lease.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'release is conditional on lease id and token, and keeps the token counter',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('release');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.equal(
          (await s!.release({ key, leaseId: randomUUID(), token: lease.token }, OPTS())).status,
          'not_owner',
        );
        assert.equal(
          (await s!.release({ key, leaseId: lease.leaseId, token: lease.token + 1n }, OPTS()))
            .status,
          'not_owner',
        );
        assert.equal(
          (
            await s!.release(
              { key: `${key}/other`, leaseId: lease.leaseId, token: lease.token },
              OPTS(),
            )
          ).status,
          'not_owner',
        );
        assert.equal(
          (await s!.inspect(key, OPTS())).holder?.token,
          lease.token,
          'a wrong release leaves the holder',
        );
        assert.equal((await lease.release()).status, 'released');
        assert.equal(
          (await lease.release()).status,
          'released',
          'a second release returns the first answer',
        );
        const state = await s!.inspect(key, OPTS());
        assert.equal(state.holder, undefined);
        assert.equal(state.lastToken, lease.token, 'release keeps the token counter');
        const next = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.ok(next.token > lease.token, 'the grant after a release has a greater token');
        await next.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'a stale renew or release never touches the new holder',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('stale');
        const leaseA = leaseOf(await a.acquire(key, { ttl: shortTtl(s1!, 200), autoRenew: false }));
        const leaseB = await eventually('B to take over', async () => {
          const r = await b.acquire(key, { ttl: 5000 });
          return r.status === 'acquired' ? r.lease : undefined;
        });
        const refA = { key, leaseId: leaseA.leaseId, token: leaseA.token };
        assert.equal((await s1!.renew({ ...refA, ttlMs: 5000 }, OPTS())).status, 'lost');
        assert.equal((await s1!.release(refA, OPTS())).status, 'not_owner');
        assert.equal((await leaseA.release()).status, 'not_owner');
        const state = await s2!.inspect(key, OPTS());
        assert.equal(state.holder?.token, leaseB.token, 'B still holds the key');
        assert.equal(state.holder?.ownerId, 'owner-b');
        assert.equal((await leaseB.renew()).status, 'renewed');
        await leaseB.release();
        await closeAll(a, b);
      });
    },
  },
];
