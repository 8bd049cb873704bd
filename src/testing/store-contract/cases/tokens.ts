import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { uniqueKey } from '../../kit/wait.js';
import { OPTS, client, leaseOf, busyOf, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: idempotent grants, busy answers that write nothing, and token order. */
export const tokenCases: StoreContractCase[] = [
  {
    name: 'a retried acquire with the same lease id is idempotent and returns the same token',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const key = uniqueKey('idem');
        const req = {
          key,
          leaseId: randomUUID(),
          ownerId: 'owner-a',
          ttlMs: 5000,
          value: undefined,
        };
        const first = await s!.tryAcquire(req, OPTS());
        const second = await s!.tryAcquire(req, OPTS());
        assert.equal(first.status, 'acquired');
        assert.equal(second.status, 'acquired');
        assert.equal((second as { token: bigint }).token, (first as { token: bigint }).token);
        assert.equal((await s!.inspect(key, OPTS())).lastToken, (first as { token: bigint }).token);
        assert.equal(
          (
            await s!.release(
              { key, leaseId: req.leaseId, token: (first as { token: bigint }).token },
              OPTS(),
            )
          ).status,
          'released',
        );
      });
    },
  },
  {
    name: 'a busy answer changes nothing: the holder keeps its token and its expiry',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('busy-noop');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, autoRenew: false }));
        const first = busyOf(await b.acquire(key, { ttl: 60_000 })).holder.remainingMs;
        for (let i = 0; i < 20; i++) busyOf(await b.acquire(key, { ttl: 60_000 }));
        const state = await s1!.inspect(key, OPTS());
        assert.equal(state.lastToken, lease.token);
        assert.equal(state.holder?.token, lease.token);
        assert.ok(
          (state.holder?.remainingMs ?? 0) <= first,
          'busy attempts must not extend the holder',
        );
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'tokens strictly increase and holders never overlap across 50 concurrent contenders on one key',
    timeoutMs: 120_000,
    async run(h) {
      await withStores(h, 5, async (stores) => {
        const clients = Array.from({ length: 50 }, (_, i) =>
          client(stores[i % stores.length]!, `owner-${i}`),
        );
        const key = uniqueKey('contend');
        // Round 1: everyone at once, no waiting: exactly one wins.
        const burst = await Promise.all(clients.map((c) => c.acquire(key, { ttl: 10_000 })));
        const winners = burst.filter((r) => r.status === 'acquired');
        assert.equal(
          winners.length,
          1,
          `exactly one of 50 simultaneous acquires must win, got ${winners.length}`,
        );
        assert.equal(burst.filter((r) => r.status === 'busy').length, 49);
        const first = leaseOf(winners[0]!);
        await first.release();
        // Round 2: everyone waits its turn.
        const tokens: bigint[] = [first.token];
        let inside = 0;
        let maxInside = 0;
        await Promise.all(
          clients.map(async (c) => {
            const lease = leaseOf(
              await c.acquire(key, { ttl: 10_000, wait: 60_000 }),
              `${c.ownerId} waiting acquire`,
            );
            inside++;
            maxInside = Math.max(maxInside, inside);
            tokens.push(lease.token);
            await new Promise((r) => setImmediate(r));
            inside--;
            await lease.release();
          }),
        );
        assert.equal(maxInside, 1, 'two contenders held the key at once');
        assert.equal(tokens.length, 51);
        for (let i = 1; i < tokens.length; i++) {
          assert.ok(
            tokens[i]! > tokens[i - 1]!,
            `grant ${i} has token ${tokens[i]} after ${tokens[i - 1]}`,
          );
        }
        await closeAll(...clients);
      });
    },
  },
  {
    name: 'tokens keep increasing across a store re-open',
    async run(h) {
      const key = uniqueKey('reopen');
      const firstToken = await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const l1 = leaseOf(await a.acquire(key, { ttl: 5000 }));
        await l1.release();
        const l2 = leaseOf(await a.acquire(key, { ttl: 5000 }));
        await l2.release();
        await closeAll(a);
        return l2.token;
      });
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a2');
        assert.equal(
          (await s!.inspect(key, OPTS())).lastToken,
          firstToken,
          'the counter survives the re-open',
        );
        const l3 = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.ok(
          l3.token > firstToken,
          `token after re-open ${l3.token} must exceed ${firstToken}`,
        );
        await l3.release();
        await closeAll(a);
      });
    },
  },
];
