import assert from 'node:assert/strict';
import { ManualClock } from '../../manual-clock.js';
import { uniqueKey, eventually } from '../../kit/wait.js';
import { shortTtl, client, leaseOf, busyOf, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: grant, busy, and expiry by the store clock. */
export const grantCases: StoreContractCase[] = [
  {
    name: 'grants a free key a positive bigint token and a deadline measured from before the request',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('grant');
        const before = a.now();
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, autoRenew: false }));
        const after = a.now();
        assert.equal(typeof lease.token, 'bigint');
        assert.ok(lease.token >= 1n, `token ${lease.token} must be positive`);
        assert.match(lease.leaseId, /^[0-9a-f-]{36}$/);
        assert.equal(lease.key, key);
        // The deadline counts from a moment between the call and the answer, minus the drift
        // allowance (ceil(1% × ttl) + 2 ms): never from the answer's arrival plus the full ttl.
        // (test/core/acquire.test.ts pins it to the send time exactly, in virtual time.)
        assert.ok(
          lease.deadline >= before + 5000 - 52,
          'deadline counts from no earlier than the call',
        );
        assert.ok(
          lease.deadline <= after + 5000 - 52,
          'deadline never exceeds the answer time + ttl − drift',
        );
        assert.equal(lease.signal.aborted, false);
        assert.equal((await lease.release()).status, 'released');
        assert.equal(lease.signal.aborted, true, 'release ends the lease locally');
        await closeAll(a);
      });
    },
  },
  {
    name: 'answers busy with the holder, its value and its remaining time, never the full lease id',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('busy');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, value: 'host-a:8080' }));
        const busy = busyOf(await b.acquire(key, { ttl: 5000 }));
        assert.equal(busy.holder.ownerId, 'owner-a');
        assert.equal(busy.holder.token, lease.token);
        assert.equal(busy.holder.value, 'host-a:8080');
        assert.equal(busy.holder.leaseIdPrefix, lease.leaseId.slice(0, 8));
        assert.ok(
          busy.holder.remainingMs > 0 && busy.holder.remainingMs <= 5000,
          `remaining ${busy.holder.remainingMs}`,
        );
        assert.ok(
          busy.retryAfterMs > 0 && busy.retryAfterMs <= 5000,
          `retryAfter ${busy.retryAfterMs}`,
        );
        const shown = JSON.stringify(busy.holder, (_k, v: unknown) =>
          typeof v === 'bigint' ? v.toString() : v,
        );
        assert.ok(!shown.includes(lease.leaseId), 'observers must not see the full lease id');
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'lets a new owner in only after the TTL has run out by the store clock',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('expiry');
        const ttl = shortTtl(s1!, 300);
        const sentA = performance.now();
        const leaseA = leaseOf(await a.acquire(key, { ttl, autoRenew: false }));
        busyOf(await b.acquire(key, { ttl: 5000 }));
        const leaseB = await eventually('B to acquire after expiry', async () => {
          const r = await b.acquire(key, { ttl: 5000 });
          return r.status === 'acquired' ? r.lease : undefined;
        });
        const grantedAfter = performance.now() - sentA;
        // B's grant was decided at the store after A's grant + ttl; A's grant came after A's
        // send, B's answer after B's grant: so the elapsed local time is at least the ttl.
        assert.ok(
          grantedAfter >= ttl - 2,
          `B got the key ${grantedAfter.toFixed(1)}ms after A asked for ${ttl}ms`,
        );
        assert.ok(leaseB.token > leaseA.token, `token ${leaseB.token} must exceed ${leaseA.token}`);
        assert.equal((await leaseA.renew()).status, 'lost');
        assert.equal((await leaseA.release()).status, 'not_owner');
        await leaseB.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'decides expiry by the store clock, not the client clock: a client whose clock jumps a day ahead still sees busy',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const clock = new ManualClock();
        const b = client(s2!, 'owner-b', { clock });
        const key = uniqueKey('clock');
        const lease = leaseOf(await a.acquire(key, { ttl: 10_000 }));
        await clock.advance(86_400_000);
        const busy = busyOf(await b.acquire(key, { ttl: 5000 }));
        assert.equal(busy.holder.token, lease.token);
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
];
