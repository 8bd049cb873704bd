import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import type { AcquireResult } from '../../src/core/results.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { EtcdLeaseStore } from '../../src/stores/etcd/store.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { uniqueKey } from '../support/keys.js';
import { elapse } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

function leaseOf(r: AcquireResult, what = 'acquire'): Lease {
  assert.equal(r.status, 'acquired', `${what}: ${r.status}`);
  return r.lease;
}

/**
 * What an etcd disaster recovery (`etcdctl snapshot save` → lose the member → `etcdctl snapshot
 * restore` into a new data dir) does to leasehold: etcd's revision — our token — restarts at
 * the snapshot's. VERIFICATION I8: afterwards the system may be unavailable, never unsafe,
 * i.e. the resource's fence must never accept a lower token after a higher one.
 */
describe('etcd restored from a snapshot: tokens go back, fences keep the resource safe', () => {
  let cluster: EtcdCluster;
  let raw: Etcd3;
  const tmp = tempDir('etcd-restore');
  before(async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'restore' });
    raw = new Etcd3({ hosts: cluster.endpoints });
  });
  after(async () => {
    raw?.close();
    await cluster?.stop();
    tmp.remove();
  });

  async function revision(): Promise<bigint> {
    const res = await raw.kv.range({ key: Buffer.from('\u0002probe') });
    return BigInt(res.header.revision);
  }

  it('after a restore, tokens repeat revisions the resource has passed: a `>` fence rejects them until etcd passes its mark, a `>=` fence accepts an equal one', async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({ store, ownerId: 'before' });
    const gt = new SqliteFence({ path: join(tmp.dir, 'fence.db'), policy: '>', table: 'gt' });
    const ge = new SqliteFence({ path: join(tmp.dir, 'fence.db'), policy: '>=', table: 'ge' });
    const key = uniqueKey('restore');
    const write = (token: bigint): [string, string] => [
      gt.apply(key, token, () => undefined).status,
      ge.apply(key, token, () => undefined).status,
    ];
    try {
      for (let i = 0; i < 2; i++) {
        const l = leaseOf(await client.acquire(key, { ttl: 2000 }));
        assert.deepEqual(write(l.token), ['applied', 'applied']);
        await l.release();
      }
      // Held while the snapshot is taken, released after it.
      const heldAtSnapshot = leaseOf(await client.acquire(`${key}/held`, { ttl: 2000 }));
      // Starts this store's 15 s session before the snapshot (leases of one TTL share one).
      await leaseOf(await client.acquire(`${key}/pre`, { ttl: 15_000 })).release();
      const snapshot = join(tmp.dir, 'snap.db');
      cluster.snapshotSave(snapshot);
      const snapRev = await revision();
      await heldAtSnapshot.release();
      // Life goes on: more grants, each written to the resource.
      let mark = 0n;
      for (let i = 0; i < 4; i++) {
        const l = leaseOf(await client.acquire(key, { ttl: 2000 }));
        assert.deepEqual(write(l.token), ['applied', 'applied']);
        mark = l.token;
        await l.release();
      }
      // Granted after the snapshot on a session etcd will restore, held across the restore
      // (15 s: its local deadline outlasts etcd's downtime).
      const acrossRestore = leaseOf(await client.acquire(`${key}/across`, { ttl: 15_000 }));
      assert.equal(gt.highWaterMark(key), mark);

      await cluster.restoreFrom(snapshot, 'restored');

      const rev = await revision();
      assert.ok(rev <= snapRev, `etcd's revision restarted at the snapshot: ${rev} ≤ ${snapRev}`);
      assert.ok(rev < mark, `below the resource's mark ${mark}`);

      // A new owner's grant repeats history; both fences reject its write: unavailable, not unsafe.
      const other = new LeaseClient({ store, ownerId: 'after' });
      const repeated = leaseOf(await other.acquire(key, { ttl: 2000 }));
      assert.ok(repeated.token < mark, `token ${repeated.token} repeats history (< ${mark})`);
      assert.deepEqual(write(repeated.token), ['stale_fence', 'stale_fence']);
      await repeated.release();

      // The lease granted after the snapshot: its entry is gone, but its session was restored,
      // so its renewals still succeed and it believes it holds — while etcd grants the key to
      // someone else. The newcomer's token is lower: the fence sides with the older holder.
      assert.equal((await acrossRestore.renew()).status, 'renewed');
      const usurper = leaseOf(await other.acquire(`${key}/across`, { ttl: 2000 }));
      assert.ok(usurper.token < acrossRestore.token);
      const acrossFence = new SqliteFence({ path: join(tmp.dir, 'fence.db'), table: 'across' });
      assert.equal(acrossFence.apply('x', acrossRestore.token, () => undefined).status, 'applied');
      assert.equal(acrossFence.apply('x', usurper.token, () => undefined).status, 'stale_fence');
      await usurper.release();

      // The lease released after the snapshot is back in etcd, on the session this store still
      // keeps alive for its other 2 s leases: nothing of ours tracks it, so it blocks the key
      // for as long as that session lives (here: beyond its TTL plus headroom).
      const keeper = leaseOf(await other.acquire(`${key}/keeper`, { ttl: 2000 }));
      const ghost = await other.inspect(`${key}/held`);
      assert.equal(ghost.holder?.token, heldAtSnapshot.token, 'the released lease is back');
      await elapse(4000);
      assert.ok(keeper.isValid(), 'the keeper renewed its 2 s session throughout');
      assert.equal(
        (await other.inspect(`${key}/held`)).holder?.token,
        heldAtSnapshot.token,
        'still held after TTL + headroom: a ghost kept alive by the shared session',
      );

      // The equal-token hazard: let etcd's revision reach mark − 1, and the next grant's token
      // is exactly the mark. `>` rejects it; `>=` (several writes per lease) accepts a write
      // from a different owner under the same token value.
      let equal: Lease | undefined;
      for (let attempt = 0; attempt < 5 && equal === undefined; attempt++) {
        for (let r = await revision(); r < mark - 1n; r = await revision()) {
          await raw.put(`${key}-bump`).value('x');
        }
        const l = leaseOf(await other.acquire(key, { ttl: 2000 }));
        if (l.token === mark) equal = l;
        else await l.release();
      }
      assert.ok(equal !== undefined, 'a grant with token equal to the mark');
      assert.deepEqual(write(equal.token), ['stale_fence', 'applied']);
      await equal.release();

      // Once etcd's revision is past the mark, new owners are accepted again.
      const next = leaseOf(await other.acquire(key, { ttl: 2000 }));
      assert.ok(next.token > mark);
      assert.deepEqual(write(next.token), ['applied', 'applied']);
      await next.release();
      await keeper.release();
      await acrossRestore.release();
      await other.close();
    } finally {
      await client.close();
      await store.close();
      gt.close();
      ge.close();
    }
  });
});
