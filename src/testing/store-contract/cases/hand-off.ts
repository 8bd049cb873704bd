import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { uniqueKey } from '../../kit/wait.js';
import { canHandOff, type StoreAcquireRequest } from '../../../core/store.js';
import { OPTS, client, leaseOf, countCalls, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: hand-off between waiters of one client. */
export const handOffCases: StoreContractCase[] = [
  {
    name: 'waiters of one client get the key in turn when its lease is released (hand-off where the store can)',
    async run(h) {
      await withStores(h, 1, async ([inner]) => {
        const counted = countCalls(inner!);
        const a = client(counted.store, 'owner-a');
        const key = uniqueKey('handoff');
        const first = leaseOf(await a.acquire(key, { ttl: 10_000 }));
        const order: string[] = [];
        const tokens: bigint[] = [first.token];
        let inside = 1;
        let maxInside = 1;
        const waiters = ['w1', 'w2', 'w3'].map(async (name) => {
          const lease = leaseOf(await a.acquire(key, { ttl: 10_000, wait: 60_000 }), name);
          inside++;
          maxInside = Math.max(maxInside, inside);
          order.push(name);
          tokens.push(lease.token);
          await new Promise((r) => setImmediate(r));
          inside--;
          assert.equal((await lease.release()).status, 'released');
        });
        // The three waiters joined the client's queue in call order, without asking the store
        // (this client holds the key): the counts at the end show it.
        assert.equal(a.heldLeases().length, 1);
        inside--;
        assert.equal((await first.release()).status, 'released');
        await Promise.all(waiters);
        assert.deepEqual(order, ['w1', 'w2', 'w3'], 'waiters of one client are served in order');
        assert.equal(maxInside, 1, 'two leases of the key were held at once');
        for (let i = 1; i < tokens.length; i++) {
          assert.ok(tokens[i]! > tokens[i - 1]!, `token ${tokens[i]} after ${tokens[i - 1]}`);
        }
        if (canHandOff(inner!)) {
          // Each release with a waiter behind it is one atomic release-and-acquire.
          assert.equal(counted.calls.releaseAndAcquire, 3);
          assert.equal(counted.calls.tryAcquire, 1, 'no waiter needed a re-check');
        } else {
          assert.equal(counted.calls.releaseAndAcquire, 0);
        }
        const state = await inner!.inspect(key, OPTS());
        assert.equal(state.holder, undefined);
        assert.equal(state.lastToken, tokens[tokens.length - 1]);
        await closeAll(a);
      });
    },
  },
  {
    name: 'release-and-acquire releases only its own lease and then obeys every acquire rule',
    async run(h, t) {
      await withStores(h, 1, async ([s]) => {
        if (!canHandOff(s!)) {
          assert.equal(
            typeof (s as { releaseAndAcquire?: unknown }).releaseAndAcquire,
            'undefined',
          );
          t.skip(`${h.name} has no atomic release-and-acquire (no hand-off capability)`);
          return;
        }
        const key = uniqueKey('rna');
        const req = (ownerId: string): StoreAcquireRequest => ({
          key,
          leaseId: randomUUID(),
          ownerId,
          ttlMs: 10_000,
          value: undefined,
        });
        const r1 = req('one');
        const g1 = await s.tryAcquire(r1, OPTS());
        assert.equal(g1.status, 'acquired');
        const t1 = g1.status === 'acquired' ? g1.token : 0n;
        // Hand from the holder to a new lease: released, granted with a greater token.
        const r2 = req('two');
        const h2 = await s.releaseAndAcquire({ key, leaseId: r1.leaseId, token: t1 }, r2, OPTS());
        assert.equal(h2.released, 'released');
        assert.equal(h2.acquired.status, 'acquired');
        const t2 = h2.acquired.status === 'acquired' ? h2.acquired.token : 0n;
        assert.ok(t2 > t1, `hand-off token ${t2} must exceed ${t1}`);
        assert.equal((await s.inspect(key, OPTS())).holder?.leaseIdPrefix, r2.leaseId.slice(0, 8));
        // A stale holder cannot hand the key on: not_owner, busy, and the holder untouched.
        const h3 = await s.releaseAndAcquire(
          { key, leaseId: r1.leaseId, token: t1 },
          req('three'),
          OPTS(),
        );
        assert.equal(h3.released, 'not_owner');
        assert.equal(h3.acquired.status, 'busy');
        if (h3.acquired.status === 'busy') assert.equal(h3.acquired.holder.token, t2);
        const held = await s.inspect(key, OPTS());
        assert.equal(held.holder?.token, t2);
        assert.equal(held.lastToken, t2, 'a refused hand-off writes nothing');
        // A failed release still leads to an ordinary attempt: a free key is granted.
        assert.equal(
          (await s.release({ key, leaseId: r2.leaseId, token: t2 }, OPTS())).status,
          'released',
        );
        const h4 = await s.releaseAndAcquire(
          { key, leaseId: r2.leaseId, token: t2 },
          req('four'),
          OPTS(),
        );
        assert.equal(h4.released, 'not_owner');
        assert.equal(h4.acquired.status, 'acquired');
        const t4 = h4.acquired.status === 'acquired' ? h4.acquired.token : 0n;
        assert.ok(t4 > t2);
        await s.release({ key, leaseId: '', token: t4 }, OPTS());
        const end = await s.inspect(key, OPTS());
        assert.equal(end.holder?.token, t4, 'a release with the wrong id changed nothing');
      });
    },
  },
];
