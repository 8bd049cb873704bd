import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { StoreAcquireResult, StoreRequestOptions } from '../../src/core/store.js';
import { RedisFence } from '../../src/fencing/redis.js';
import { RedisLeaseStore } from '../../src/stores/redis/store.js';
import { deletePrefix, TEST_REDIS_URL } from '../contract/harnesses/redis.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { eventually } from '../support/time.js';

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });
const TTL = 30_000;

function granted(r: StoreAcquireResult, who: string): { token: bigint; expiresAtWallMs: number } {
  assert.equal(r.status, 'acquired', `${who} should be granted`);
  const g = r;
  assert.ok(g.expiresAtWallMs !== undefined, `${who}: the store reports its expiry`);
  return { token: g.token, expiresAtWallMs: g.expiresAtWallMs };
}

async function replicationInfo(r: Redis): Promise<Record<string, string>> {
  const text = await r.info('replication');
  return Object.fromEntries(
    text
      .split('\r\n')
      .filter((l) => l.includes(':'))
      .map((l) => l.split(':', 2) as [string, string]),
  );
}

describe('Redis failover loses a grant: two holders, and the fence still rejects the old one', () => {
  const servers: RedisProcess[] = [];
  const clients: Redis[] = [];
  const stores: RedisLeaseStore[] = [];
  after(async () => {
    for (const s of stores) await s.close();
    for (const c of clients) c.disconnect();
    for (const s of servers) {
      s.signal('SIGCONT');
      await s.stop();
    }
  });

  it('A is granted on the primary, replication is cut, the primary dies, the promoted replica grants B: both hold, B’s token is greater, A’s late write is stale_fence', async () => {
    // No 5 s diskless-sync delay before the replica's first full sync.
    const primary = await startRedis(['--repl-diskless-sync-delay', '0']);
    servers.push(primary);
    const replica = await startRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
    servers.push(replica);
    const pAdmin = primary.admin();
    const rAdmin = replica.admin();
    clients.push(pAdmin, rAdmin);
    await eventually('replica link up', async () =>
      (await replicationInfo(rAdmin))['master_link_status'] === 'up' ? true : undefined,
    );

    const prefix = `failover:${randomBytes(3).toString('hex')}:`;
    const key = 'jobs/nightly';
    const onPrimary = new RedisLeaseStore({ redis: primary.url, prefix });
    const onReplica = new RedisLeaseStore({ redis: replica.url, prefix });
    stores.push(onPrimary, onReplica);

    // A grant and release that the replica does receive: the counters agree before the fault.
    const warmId = randomUUID();
    const warm = granted(
      await onPrimary.tryAcquire(
        { key, leaseId: warmId, ownerId: 'warm-up', ttlMs: TTL, value: undefined },
        OPTS(),
      ),
      'warm-up',
    );
    assert.equal(
      (await onPrimary.release({ key, leaseId: warmId, token: warm.token }, OPTS())).status,
      'released',
    );
    // WAIT on another connection proves nothing: compare replication offsets instead.
    const offset = Number((await replicationInfo(pAdmin))['master_repl_offset']);
    await eventually('the replica to apply the warm-up', async () =>
      Number((await replicationInfo(rAdmin))['slave_repl_offset']) >= offset ? true : undefined,
    );

    // Stall replication deterministically: stop the replica process, then have the primary
    // drop its link, so nothing written from now on can reach the replica's socket.
    replica.signal('SIGSTOP');
    await pAdmin.client('KILL', 'TYPE', 'replica');
    await eventually('primary to see no replica', async () =>
      (await replicationInfo(pAdmin))['connected_slaves'] === '0' ? true : undefined,
    );

    const a = granted(
      await onPrimary.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'worker-a', ttlMs: TTL, value: undefined },
        OPTS(),
      ),
      'A',
    );
    assert.ok(a.token > warm.token);

    await primary.kill(); // SIGKILL: A's grant dies with it
    await onPrimary.close();
    replica.signal('SIGCONT');
    await rAdmin.replicaof('NO', 'ONE');
    await eventually('replica promoted', async () =>
      (await replicationInfo(rAdmin))['role'] === 'master' ? true : undefined,
    );

    // The promoted replica never saw A's grant: its counter is the warm-up token.
    const seen = await onReplica.inspect(key, OPTS());
    assert.equal(seen.holder, undefined, 'A’s grant was lost in the failover');
    assert.equal(seen.lastToken, warm.token);
    assert.ok(
      seen.lastToken + 1n <= a.token,
      'a counter alone would have handed B a token no greater than A’s',
    );

    const b = granted(
      await onReplica.tryAcquire(
        { key, leaseId: randomUUID(), ownerId: 'worker-b', ttlMs: TTL, value: undefined },
        OPTS(),
      ),
      'B',
    );
    const bGrantedAt = b.expiresAtWallMs - TTL;
    // Two holders by the store's own view: B was granted before A's lease ran out.
    assert.ok(
      bGrantedAt < a.expiresAtWallMs,
      `B granted at ${bGrantedAt}, A’s lease ends at ${a.expiresAtWallMs}: the intervals overlap`,
    );
    // The TIME floor keeps tokens moving forward across the lost write.
    assert.ok(b.token > a.token, `B’s token ${b.token} must exceed A’s ${a.token}`);

    // The protected resource (the shared Redis) fences: B writes, then A's late write arrives.
    const resource = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    clients.push(resource);
    const rp = `leasehold-test:failover-resource:${process.pid}-${randomBytes(3).toString('hex')}:`;
    try {
      const fence = new RedisFence({ redis: resource, prefix: rp });
      const target = `${rp}{${key}}:output`;
      assert.equal((await fence.set(key, b.token, target, 'by-B')).status, 'applied');
      assert.deepEqual(await fence.set(key, a.token, target, 'by-A'), {
        status: 'stale_fence',
        highWaterMark: b.token,
      });
      assert.equal(await resource.get(target), 'by-B');

      // Control arm: the same two writes without a fence — the stale owner wins.
      const unfenced = `${rp}{${key}}:unfenced`;
      await resource.set(unfenced, 'by-B');
      await resource.set(unfenced, 'by-A');
      assert.equal(await resource.get(unfenced), 'by-A', 'without a fence, A overwrites B');
    } finally {
      await deletePrefix(resource, rp);
    }
  });
});
