import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import type { StoreAcquireResult, StoreRequestOptions } from '../../src/core/store.js';
import { advanceRedisFencingEpoch } from '../../src/stores/redis/epoch.js';
import { parseReplicationInfo } from '../../src/stores/redis/incarnation.js';
import { RedisLeaseStore } from '../../src/stores/redis/store.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { eventually } from '../support/time.js';

// A replica promoted while the primary's last grants had not reached it. The tokens here run
// ahead of Redis TIME × 1024 (an epoch set with `--at-least`, e.g. a fenced resource's mark),
// so nothing but the epoch keeps the promoted replica from handing the lost tokens out again.
// Detection arm: the store notices the new replication id and raises the epoch before its
// first grant there; control arm (`detectIncarnation: false`): the lost tokens come back.

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });
const TTL = 60_000;
const KEY = 'jobs/nightly';

function tokenOf(r: StoreAcquireResult, who: string): bigint {
  assert.equal(r.status, 'acquired', `${who} should be granted`);
  return r.status === 'acquired' ? r.token : 0n;
}

async function info(r: Redis): Promise<Record<string, string>> {
  return parseReplicationInfo(await r.info('replication'));
}

interface ArmResult {
  readonly lost: readonly bigint[];
  readonly after: bigint;
  readonly heldAcross: { readonly status: string; readonly reason?: string };
}

const servers: RedisProcess[] = [];
const admins: Redis[] = [];
const stores: RedisLeaseStore[] = [];

async function failoverArm(detect: boolean): Promise<ArmResult> {
  const primary = await startRedis(['--repl-diskless-sync-delay', '0']);
  servers.push(primary);
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
  servers.push(replica);
  const pAdmin = primary.admin();
  const rAdmin = replica.admin();
  admins.push(pAdmin, rAdmin);
  await eventually('replica link up', async () =>
    (await info(rAdmin))['master_link_status'] === 'up' ? true : undefined,
  );
  const prefix = `failover-detect:${randomUUID().slice(0, 8)}:`;
  const sec = String((await pAdmin.time())[0]);
  // Far ahead of the clock: tokens are the counter's, not TIME × 1024.
  await advanceRedisFencingEpoch({
    redis: pAdmin,
    prefix,
    atLeast: BigInt(sec) * 1000n * 1024n + 10n ** 12n,
  });
  const onPrimary = new RedisLeaseStore({ redis: primary.url, prefix, detectIncarnation: detect });
  // Connected to the replica from the start: it is promoted under this connection.
  const onReplica = new RedisLeaseStore({ redis: replica.url, prefix, detectIncarnation: detect });
  stores.push(onPrimary, onReplica);
  const grant = (store: RedisLeaseStore, leaseId: string, key = KEY) =>
    store.tryAcquire({ key, leaseId, ownerId: leaseId, ttlMs: TTL, value: undefined }, OPTS());

  // Replicated: one grant released, one lease held on another key across the failover.
  const warmId = randomUUID();
  const warm = tokenOf(await grant(onPrimary, warmId), 'warm-up');
  await onPrimary.release({ key: KEY, leaseId: warmId, token: warm }, OPTS());
  const heldId = randomUUID();
  const held = tokenOf(await grant(onPrimary, heldId, 'jobs/held'), 'held');
  const offset = Number((await info(pAdmin))['master_repl_offset']);
  await eventually('the replica to apply the warm-up', async () =>
    Number((await info(rAdmin))['slave_repl_offset']) >= offset ? true : undefined,
  );

  // Cut replication: the replica stopped, its link dropped; three grants only the primary has.
  replica.signal('SIGSTOP');
  await pAdmin.client('KILL', 'TYPE', 'replica');
  await eventually('primary to see no replica', async () =>
    (await info(pAdmin))['connected_slaves'] === '0' ? true : undefined,
  );
  const lost: bigint[] = [];
  for (let i = 0; i < 3; i++) {
    const id = randomUUID();
    lost.push(tokenOf(await grant(onPrimary, id), `lost grant ${i}`));
    await onPrimary.release({ key: KEY, leaseId: id, token: lost[i]! }, OPTS());
  }
  await primary.kill();
  replica.signal('SIGCONT');
  await rAdmin.replicaof('NO', 'ONE');
  await eventually('replica promoted', async () =>
    (await info(rAdmin))['role'] === 'master' ? true : undefined,
  );

  const afterToken = tokenOf(await grant(onReplica, randomUUID()), 'after the failover');
  const heldAcross = await onReplica.renew(
    { key: 'jobs/held', leaseId: heldId, token: held, ttlMs: TTL },
    OPTS(),
  );
  return { lost, after: afterToken, heldAcross };
}

describe('Redis: a replica promoted after missing grants', () => {
  after(async () => {
    for (const s of stores) await s.close();
    for (const c of admins) c.disconnect();
    for (const s of servers) {
      s.signal('SIGCONT');
      await s.stop();
    }
  });

  it('with detection, the first grant on the promoted replica is above every lost token, and a lease held across is lost with reason failover', async (t) => {
    const r = await failoverArm(true);
    t.diagnostic(`lost ${r.lost.join(', ')}; first grant after ${r.after}`);
    const reissued = r.lost.filter((t) => t >= r.after).length;
    assert.equal(reissued, 0, `after ${r.after}, lost ${r.lost.join(', ')}`);
    assert.deepEqual(r.heldAcross, { status: 'lost', reason: 'failover' });
  });

  it('control arm (detection off): the promoted replica grants a lost token again', async (t) => {
    const r = await failoverArm(false);
    t.diagnostic(`lost ${r.lost.join(', ')}; first grant after ${r.after}`);
    assert.ok(
      r.lost.includes(r.after),
      `after ${r.after} is one of the lost tokens ${r.lost.join(', ')}`,
    );
    assert.equal(r.heldAcross.status, 'renewed', 'nothing tells the held lease it crossed');
  });

  it('costs no command per grant: the same commands per acquire and release, detection on or off', async (t) => {
    const server = await startRedis();
    servers.push(server);
    const admin = server.admin();
    admins.push(admin);
    const perCycle: number[] = [];
    for (const detect of [true, false]) {
      const store = new RedisLeaseStore({
        redis: server.url,
        prefix: `calls-${String(detect)}:`,
        detectIncarnation: detect,
      });
      stores.push(store);
      await store.ready();
      const first = await store.tryAcquire(
        { key: 'k', leaseId: 'warm', ownerId: 'o', ttlMs: TTL, value: undefined },
        OPTS(),
      );
      await store.release({ key: 'k', leaseId: 'warm', token: tokenOf(first, 'warm') }, OPTS());
      await admin.config('RESETSTAT');
      for (let i = 0; i < 50; i++) {
        const id = `l${i}`;
        const r = await store.tryAcquire(
          { key: 'k', leaseId: id, ownerId: 'o', ttlMs: TTL, value: undefined },
          OPTS(),
        );
        await store.release({ key: 'k', leaseId: id, token: tokenOf(r, id) }, OPTS());
      }
      const stats = await admin.info('commandstats');
      let calls = 0;
      for (const m of stats.matchAll(/^cmdstat_(\w+(?:\|\w+)?):calls=(\d+)/gm))
        if (m[1] !== 'info' && m[1] !== 'config|resetstat') calls += Number(m[2]);
      perCycle.push(calls / 50);
    }
    t.diagnostic(`commands per acquire + release, detection on, off: ${perCycle.join(', ')}`);
    assert.equal(perCycle[0], perCycle[1], `calls per cycle, on and off: ${perCycle.join(', ')}`);
  });
});
