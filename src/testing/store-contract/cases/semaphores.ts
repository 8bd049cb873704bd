import assert from 'node:assert/strict';
import { isLeaseholdError } from '../../../core/errors.js';
import type { Lease } from '../../../core/lease.js';
import type { FencedSlotAcquireResult, SlotLease } from '../../../core/semaphore.js';
import { slotKey, slotPrefix } from '../../../core/slot-keys.js';
import { uniqueKey, eventually } from '../../kit/wait.js';
import { shortTtl, OPTS, client, busyOf, observed, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

function slotOf(r: FencedSlotAcquireResult, what = 'acquireSlot'): SlotLease {
  assert.equal(
    r.status,
    'acquired',
    `${what} should be acquired, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  if (r.status !== 'acquired') throw new Error('unreachable');
  return r.lease;
}

/** The store contract for semaphores: slots are keys, so every store serves them as keys. */
export const semaphoreCases: StoreContractCase[] = [
  {
    name: 'a semaphore of 3 grants 3 distinct slots to racing clients of two store instances, then answers busy',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const clients = Array.from({ length: 6 }, (_, i) =>
          client(i % 2 === 0 ? s1! : s2!, `owner-${i}`),
        );
        const name = uniqueKey('sem-race');
        const answers = await Promise.all(
          clients.map((c) => c.acquireSlot(name, { limit: 3, ttl: 30_000 })),
        );
        const held = answers.flatMap((a) => (a.status === 'acquired' ? [a.lease] : []));
        // Racing one pass each, some may miss a slot another just freed; none can exceed 3.
        assert.ok(held.length <= 3, `${held.length} holders of a 3-slot semaphore`);
        const more = await Promise.all(
          clients.map((c) => c.acquireSlot(name, { limit: 3, ttl: 30_000 })),
        );
        for (const a of more) if (a.status === 'acquired') held.push(a.lease);
        assert.equal(held.length, 3, 'three holders once everyone asked twice');
        assert.deepEqual(held.map((l) => l.slot).sort(), [0, 1, 2], 'each holder has its own slot');
        for (const l of held) {
          assert.equal(l.semaphore, name);
          assert.equal(l.key, slotKey(name, l.slot));
        }
        const busy = busyOf(await clients[0]!.acquireSlot(name, { limit: 3, ttl: 30_000 }));
        assert.ok(busy.retryAfterMs > 0 && busy.retryAfterMs <= 30_000);
        const listed = await s1!.list(slotPrefix(name), 10, OPTS());
        assert.deepEqual(
          listed.map((s) => s.key),
          [0, 1, 2].map((i) => slotKey(name, i)),
          'the slots are listed as keys under the semaphore',
        );
        await Promise.all(held.map((l) => l.release()));
        await closeAll(...clients);
      });
    },
  },
  {
    name: "a slot's token grows with every grant of that slot, and a released slot is taken again",
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const name = uniqueKey('sem-tokens');
        const first = slotOf(await a.acquireSlot(name, { limit: 2, ttl: 30_000 }));
        const second = slotOf(await a.acquireSlot(name, { limit: 2, ttl: 30_000 }));
        assert.notEqual(first.slot, second.slot);
        const freed = first.slot;
        const before = first.token;
        assert.equal((await first.release()).status, 'released');
        const again = slotOf(await a.acquireSlot(name, { limit: 2, ttl: 30_000 }));
        assert.equal(again.slot, freed, 'the only free slot is the one released');
        assert.ok(again.token > before, `slot ${freed}: ${again.token} after ${before}`);
        const state = await s!.inspect(slotKey(name, freed), OPTS());
        assert.ok(state.lastToken >= again.token);
        assert.equal(state.holder?.ownerId, 'owner-a');
        await Promise.all([second.release(), again.release()]);
        await closeAll(a);
      });
    },
  },
  {
    name: 'a slot waiter is woken by the release of any slot, not by polling',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const spy = observed(s2!);
        const b = client(spy.store, 'owner-b', { pollInterval: 60_000 });
        const name = uniqueKey('sem-wake');
        const held: Lease[] = [];
        for (let i = 0; i < 2; i++)
          held.push(slotOf(await a.acquireSlot(name, { limit: 2, ttl: 30_000 })));
        const waiting = b.acquireSlot(name, { limit: 2, ttl: 5000, wait: 10_000 });
        // Parked: both slots watched, then found busy once more.
        await eventually('B to watch both slots and re-check', () =>
          spy.watches() === 2 && spy.busyAnswers() >= 4 ? true : undefined,
        );
        const released = held[1]!;
        const releasedAt = performance.now();
        await released.release();
        const got = slotOf(await waiting);
        const wokeAfter = performance.now() - releasedAt;
        assert.ok(wokeAfter < 3000, `B took ${wokeAfter.toFixed(0)}ms to notice the release`);
        assert.equal(got.slot, released.slot);
        assert.ok(got.token > released.token);
        await Promise.all([got.release(), held[0]!.release()]);
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a slot whose holder stops renewing is taken over after its expiry, under a larger token',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const ttl = shortTtl(s1!, 400);
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const name = uniqueKey('sem-expiry');
        const stale = slotOf(await a.acquireSlot(name, { limit: 1, ttl, autoRenew: false }));
        const t0 = performance.now();
        const got = slotOf(
          await b.acquireSlot(name, { limit: 1, ttl: 30_000, wait: ttl * 10 + 5000 }),
        );
        const waited = performance.now() - t0;
        assert.equal(got.slot, 0);
        assert.ok(got.token > stale.token);
        // Never before the holder's TTL ran out by the store's clock (minus timer slack).
        assert.ok(waited >= ttl - 50, `took over after ${waited.toFixed(0)}ms, ttl ${ttl}ms`);
        assert.notEqual((await stale.renew()).status, 'renewed', 'the old holder lost its slot');
        await got.release();
        await stale.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'slot keys are reserved: acquire refuses them, names may not contain the marker',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const name = uniqueKey('sem-reserved');
        const refused = async (p: Promise<unknown>, what: string): Promise<void> => {
          await assert.rejects(p, (e) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'), what);
        };
        await refused(a.acquire(slotKey(name, 0), { ttl: 1000 }), 'acquire of a slot key');
        await refused(a.acquire(`${name}#slot=x`, { ttl: 1000 }), 'a malformed slot key');
        await refused(a.acquireSlot(`${name}#slot=0`, { limit: 1, ttl: 1000 }), 'marker in name');
        await refused(a.acquireSlot(name, { limit: 0, ttl: 1000 }), 'limit 0');
        await refused(a.acquireSlot(name, { limit: 1025, ttl: 1000 }), 'limit above 1024');
        await closeAll(a);
      });
    },
  },
];
