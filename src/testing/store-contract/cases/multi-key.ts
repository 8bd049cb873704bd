import assert from 'node:assert/strict';
import type { AcquireAllResult, LeaseSet } from '../../../core/lease-set.js';
import { uniqueKey } from '../../kit/wait.js';
import { OPTS, client, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

function setOf(r: AcquireAllResult, what = 'acquireAll'): LeaseSet {
  assert.equal(
    r.status,
    'acquired',
    `${what} should be acquired, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  if (r.status !== 'acquired') throw new Error('unreachable');
  return r.leases;
}

/** The store contract for several keys at once: all or none, a token per key, no deadlock. */
export const multiKeyCases: StoreContractCase[] = [
  {
    name: 'acquireAll is all or none: a key held by another owner leaves none of the set held',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const base = uniqueKey('multi-none');
        const keys = [`${base}/3`, `${base}/1`, `${base}/2`];
        const blocker = await b.acquire(`${base}/2`, { ttl: 30_000 });
        assert.equal(blocker.status, 'acquired');
        const r = await a.acquireAll(keys, { ttl: 30_000 });
        assert.equal(r.status, 'busy');
        if (r.status !== 'busy') return;
        assert.equal(r.key, `${base}/2`, 'names the key that blocked');
        assert.equal(r.holder.ownerId, 'owner-b');
        assert.equal(a.heldLeases().length, 0);
        for (const k of [`${base}/1`, `${base}/3`]) {
          assert.equal((await s2!.inspect(k, OPTS())).holder, undefined, `${k} is not held`);
        }
        if (blocker.status === 'acquired') await blocker.lease.release();
        const ok = setOf(await a.acquireAll(keys, { ttl: 30_000 }));
        assert.deepEqual(ok.keys, [`${base}/1`, `${base}/2`, `${base}/3`]);
        await ok.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'acquireAll grants a token per key, each above that key’s earlier tokens',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const base = uniqueKey('multi-tokens');
        const keys = [`${base}/a`, `${base}/b`];
        const lone = await a.acquire(keys[1]!, { ttl: 30_000 });
        assert.equal(lone.status, 'acquired');
        const before = lone.status === 'acquired' ? lone.lease.token : 0n;
        if (lone.status === 'acquired') await lone.lease.release();
        const set = setOf(await a.acquireAll(keys, { ttl: 30_000 }));
        assert.equal(set.tokens.size, 2);
        assert.ok(set.tokens.get(keys[1]!)! > before, 'b: a token above its earlier grant');
        for (const k of keys) {
          const state = await s!.inspect(k, OPTS());
          assert.equal(state.holder?.ownerId, 'owner-a');
          assert.equal(state.lastToken, set.tokens.get(k), `${k}: the store's token is the set's`);
        }
        await set.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'losing one key loses the set: its signal fires and the other keys are freed',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const base = uniqueKey('multi-loss');
        const keys = [`${base}/1`, `${base}/2`, `${base}/3`];
        const set = setOf(await a.acquireAll(keys, { ttl: 30_000 }));
        // Someone ends key 2's lease at the store (as an operator would): its renewal is lost.
        const victim = set.leases.get(`${base}/2`)!;
        const ref = { key: victim.key, leaseId: victim.leaseId, token: victim.storeToken };
        assert.equal((await s2!.release(ref, OPTS())).status, 'released');
        assert.equal((await victim.renew()).status, 'lost');
        assert.equal(set.signal.aborted, true);
        assert.equal(set.status, 'lost');
        assert.equal(set.lostKey?.key, `${base}/2`);
        // The other members are released by the set, not left to expire.
        const again = setOf(
          await b.acquireAll(keys, { ttl: 30_000, wait: 5000 }),
          'acquireAll after the loss',
        );
        for (const k of keys) assert.ok(again.tokens.get(k)! > set.tokens.get(k)!);
        await again.release();
        await set.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'overlapping sets taken in opposite orders by two clients both finish (no deadlock)',
    timeoutMs: 60_000,
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const base = uniqueKey('multi-overlap');
        const k = (i: number): string => `${base}/${i}`;
        let inside = new Set<string>();
        const worker = async (c: typeof a, sets: string[][]): Promise<number> => {
          let done = 0;
          for (let round = 0; round < 5; round++) {
            for (const keys of sets) {
              const set = setOf(await c.acquireAll(keys, { ttl: 30_000, wait: 20_000 }));
              for (const key of keys) {
                assert.ok(!inside.has(key), `${key} held by two sets at once`);
              }
              inside = new Set([...inside, ...keys]);
              await new Promise((r) => setTimeout(r, 5));
              for (const key of keys) inside.delete(key);
              await set.release();
              done++;
            }
          }
          return done;
        };
        const [da, db] = await Promise.all([
          worker(a, [
            [k(1), k(2), k(3)],
            [k(4), k(2)],
          ]),
          worker(b, [
            [k(3), k(2), k(1)],
            [k(2), k(4)],
          ]),
        ]);
        assert.equal(da + db, 20, 'every set of both clients was taken');
        await closeAll(a, b);
      });
    },
  },
];
