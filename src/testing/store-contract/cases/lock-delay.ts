import assert from 'node:assert/strict';
import { elapse, uniqueKey } from '../../kit/wait.js';
import { busyOf, client, closeAll, leaseOf, shortTtl, withStores } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

const NO_LOCK_DELAY = 'the store does not declare capabilities.lockDelay';

/** The store contract for lock-delay (stores with `capabilities.lockDelay`). */
export const lockDelayCases: StoreContractCase[] = [
  {
    name: 'after an expiry the key stays busy for its lock-delay (reason lock_delay, the delay left), then is granted (stores with lockDelay)',
    async run(h, t) {
      await withStores(h, 2, async ([s1, s2]) => {
        if (s1!.capabilities.lockDelay !== true) return t.skip(NO_LOCK_DELAY);
        const ttl = shortTtl(s1!, 300);
        const delay = ttl * 2;
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('lock-delay');
        const stale = leaseOf(await a.acquire(key, { ttl, autoRenew: false, lockDelay: delay }));
        const grantedAt = performance.now();
        await elapse(ttl + 100);
        const busy = busyOf(await b.acquire(key, { ttl: 30_000 }));
        assert.equal(busy.reason, 'lock_delay');
        assert.equal(busy.holder.ownerId, 'owner-a', 'the busy answer names the expired holder');
        assert.ok(
          busy.retryAfterMs > 0 && busy.retryAfterMs <= delay,
          `retryAfterMs ${busy.retryAfterMs} within the ${delay}ms delay`,
        );
        const next = leaseOf(await b.acquire(key, { ttl: 30_000, wait: delay * 5 + 5000 }));
        const after = performance.now() - grantedAt;
        assert.ok(after >= ttl + delay - 50, `granted ${after.toFixed(0)}ms after the first grant`);
        assert.ok(next.token > stale.token);
        await next.release();
        await stale.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a release leaves no lock-delay, and ignoreLockDelay takes the key during one (stores with lockDelay)',
    async run(h, t) {
      await withStores(h, 2, async ([s1, s2]) => {
        if (s1!.capabilities.lockDelay !== true) return t.skip(NO_LOCK_DELAY);
        const ttl = shortTtl(s1!, 300);
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const released = uniqueKey('lock-delay-release');
        const first = leaseOf(await a.acquire(released, { ttl: 30_000, lockDelay: '1h' }));
        assert.equal((await first.release()).status, 'released');
        const taken = leaseOf(
          await b.acquire(released, { ttl: 30_000 }),
          'acquire after a release',
        );
        await taken.release();
        const expired = uniqueKey('lock-delay-ignore');
        const stale = leaseOf(await a.acquire(expired, { ttl, autoRenew: false, lockDelay: '1h' }));
        await elapse(ttl + 100);
        assert.equal(busyOf(await b.acquire(expired, { ttl: 30_000 })).reason, 'lock_delay');
        const fenced = leaseOf(
          await b.acquire(expired, { ttl: 30_000, ignoreLockDelay: true }),
          'acquire with ignoreLockDelay',
        );
        assert.ok(fenced.token > stale.token);
        await fenced.release();
        await stale.release();
        await closeAll(a, b);
      });
    },
  },
];
