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

    // The protected resource (the shared Redis): both holders run the same nightly job — check
    // their own grant is live by the store's expiry, read the output, write theirs. B runs
    // first; A, unaware its grant died with the primary, runs late. Each output names its
    // writer and token, so the resource's final state says whose write won.
    const resource = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    clients.push(resource);
    const rp = `leasehold-test:failover-resource:${process.pid}-${randomBytes(3).toString('hex')}:`;
    const holders = [
      { name: 'B', ...b },
      { name: 'A', ...a },
    ];
    type Write = (target: string, token: bigint, value: string) => Promise<string>;
    const runJobs = async (target: string, write: Write): Promise<string[]> => {
      const outcomes: string[] = [];
      for (const h of holders) {
        assert.ok(
          Date.now() < h.expiresAtWallMs,
          `${h.name} believes it holds the key: its grant has not expired by the store's time`,
        );
        const before = await resource.get(target);
        outcomes.push(await write(target, h.token, `${h.name}:${h.token} after ${before}`));
      }
      return outcomes;
    };
    try {
      const fence = new RedisFence({ redis: resource, prefix: rp });
      const fenced = `${rp}{${key}}:output`;
      const fencedOutcomes = await runJobs(
        fenced,
        async (target, token, value) => (await fence.set(key, token, target, value)).status,
      );
      assert.deepEqual(fencedOutcomes, ['applied', 'stale_fence'], 'the fence rejects A, not B');
      assert.equal(await resource.get(fenced), `B:${b.token} after null`);

      // Control arm: the same jobs on both grants with the fence left out — the write of A,
      // whose token is lower, lands after B's: the stale holder's output wins.
      const unfenced = `${rp}{${key}}:unfenced`;
      const controlOutcomes = await runJobs(unfenced, async (target, _token, value) =>
        (await resource.set(target, value)) === 'OK' ? 'applied' : 'not_written',
      );
      assert.deepEqual(controlOutcomes, ['applied', 'applied'], 'both holders wrote');
      const final = await resource.get(unfenced);
      assert.equal(
        final,
        `A:${a.token} after B:${b.token} after null`,
        'without a fence, the lower token (A) overwrites the higher (B)',
      );
    } finally {
      await deletePrefix(resource, rp);
    }
  });
});
