import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import type { StoreRequestOptions } from '../../src/core/store.js';
import { RedisLeaseStore } from '../../src/stores/redis/store.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { eventually } from '../support/time.js';

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

describe('Redis restart without persistence', () => {
  let server: RedisProcess | undefined;
  after(async () => {
    await server?.stop();
  });

  it('tokens issued after a SIGKILL and restart that lost every key exceed those issued before', async () => {
    server = await startRedis();
    const store = new RedisLeaseStore({ redis: server.url, prefix: 'restart:' });
    try {
      const keys = ['a', 'b/c', 'hot'];
      const before = new Map<string, bigint>();
      for (const key of keys) {
        for (let i = 0; i < 5; i++) {
          const leaseId = randomUUID();
          const r = await store.tryAcquire(
            { key, leaseId, ownerId: 'before', ttlMs: 60_000, value: undefined },
            OPTS(),
          );
          assert.equal(r.status, 'acquired');
          const token = (r as { token: bigint }).token;
          assert.ok(token > (before.get(key) ?? 0n));
          before.set(key, token);
          if (i < 4) await store.release({ key, leaseId, token }, OPTS());
        }
      }

      await server.restart(); // SIGKILL, then a fresh process: no RDB, no AOF, no script cache

      const after = await eventually('the store to reach the restarted server', async () => {
        try {
          return await store.inspect('a', OPTS());
        } catch {
          return undefined;
        }
      });
      assert.equal(after.lastToken, 0n, 'the restart lost the counter');
      assert.equal(after.holder, undefined, 'and the lease');
      for (const key of keys) {
        const r = await store.tryAcquire(
          { key, leaseId: randomUUID(), ownerId: 'after', ttlMs: 60_000, value: undefined },
          OPTS(),
        );
        assert.equal(r.status, 'acquired', `${key}: the lost lease no longer blocks`);
        const token = (r as { token: bigint }).token;
        assert.ok(
          token > before.get(key)!,
          `${key}: token ${token} after the restart must exceed ${before.get(key)}`,
        );
      }
    } finally {
      await store.close();
    }
  });
});
