import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { Lease } from '../../../src/core/lease.js';
import type { AcquireResult } from '../../../src/core/results.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { spawnCli } from '../../support/cli.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import { uniqueKey } from '../../support/keys.js';
import { tempDir } from '../../support/tmp.js';

function leaseOf(r: AcquireResult, what = 'acquire'): Lease {
  assert.equal(r.status, 'acquired', `${what}: ${r.status}`);
  return r.lease;
}

interface Tally {
  grants: number;
  refused: number;
  staleAttempted: number;
  staleRejected: number;
  staleAccepted: number;
}
const tally = (): Tally => ({
  grants: 0,
  refused: 0,
  staleAttempted: 0,
  staleRejected: 0,
  staleAccepted: 0,
});

/**
 * An etcd disaster recovery (`etcdctl snapshot save` → lose the member → `etcdctl snapshot
 * restore` into a new data dir): etcd's revision, from which tokens are made, restarts at the
 * snapshot's. A store instance that lived through it sees the revision go back and refuses to
 * grant; one started afterwards cannot tell, so its tokens repeat and the fence rejects every
 * one; `leasehold epoch` (the real CLI) writes a new base, after which every token exceeds
 * every token issued before — on both instances — and the leases restored from the snapshot
 * are gone.
 */
describe('etcd restored from a snapshot, then a new fencing epoch', () => {
  let cluster: EtcdCluster;
  const tmp = tempDir('etcd-restore');
  let fence: SqliteFence;
  const base = uniqueKey('restore');
  const keys = [`${base}/a`, `${base}/b`, `${base}/c`];
  const marks = new Map<string, bigint>();
  let lived: EtcdLeaseStore;
  let livedClient: LeaseClient;
  let heldAtSnapshot: Lease;
  let acrossRestore: Lease;
  before(async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'restore' });
    fence = new SqliteFence({ path: join(tmp.dir, 'fence.db'), policy: '>' });
    lived = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    livedClient = new LeaseClient({ store: lived, ownerId: 'lived' });
  });
  after(async () => {
    await livedClient?.close();
    await lived?.close();
    fence?.close();
    await cluster?.stop();
    tmp.remove();
  });

  /** Acquires, writes through the fence, releases; counts into `t`. */
  async function round(client: LeaseClient, key: string, t: Tally): Promise<bigint | undefined> {
    const r = await client.acquire(key, { ttl: 2000 });
    if (r.status === 'unavailable') {
      t.refused++;
      return undefined;
    }
    const lease = leaseOf(r, key);
    t.grants++;
    const stale = lease.token <= (marks.get(key) ?? 0n);
    if (stale) t.staleAttempted++;
    const w = fence.apply(key, lease.token, () => undefined);
    if (stale && w.status === 'stale_fence') t.staleRejected++;
    if (stale && w.status === 'applied') t.staleAccepted++;
    if (!stale) marks.set(key, lease.token);
    await lease.release();
    return lease.token;
  }

  it('grants, is snapshotted, grants more, and is restored: revisions go back', async () => {
    const t = tally();
    for (const key of keys) await round(livedClient, key, t);
    heldAtSnapshot = leaseOf(await livedClient.acquire(`${base}/held`, { ttl: 2000 }));
    // Starts this store's 15 s session before the snapshot (leases of one TTL share one).
    await leaseOf(await livedClient.acquire(`${base}/pre`, { ttl: 15_000 })).release();
    const snapshot = join(tmp.dir, 'snap.db');
    cluster.snapshotSave(snapshot);
    await heldAtSnapshot.release();
    for (let i = 0; i < 3; i++) for (const key of keys) await round(livedClient, key, t);
    // Granted after the snapshot on a session etcd will restore; held across the restore.
    acrossRestore = leaseOf(await livedClient.acquire(`${base}/across`, { ttl: 15_000 }));
    assert.equal(t.staleAttempted, 0);
    await cluster.restoreFrom(snapshot, 'restored');
  });

  it('the instance that lived through the restore notices it and refuses every grant', async () => {
    const t = tally();
    for (const key of [...keys, `${base}/new`]) {
      const r = await livedClient.acquire(key, { ttl: 2000 });
      assert.equal(r.status, 'unavailable', `${key}: ${r.status}`);
      assert.ok(isLeaseholdError(r.cause, 'ERR_UNAVAILABLE'));
      assert.match((r.cause as Error).message, /restored from a snapshot/);
      assert.match((r.cause as Error).message, /leasehold epoch --store etcd:/);
      t.refused++;
    }
    // It also ended the lease it held across the restore (granted after the snapshot).
    assert.equal((await acrossRestore.renew()).status, 'lost');
    assert.equal(acrossRestore.signal.aborted, true);
    console.log(`etcd restore, noticed: ${JSON.stringify(t)}`);
    assert.equal(t.grants, 0);
  });

  it('an instance started after the restore cannot tell: its tokens repeat and the fence rejects every repeated one', async () => {
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({ store, ownerId: 'blind' });
    const t = tally();
    try {
      // The lease granted after the snapshot has no entry any more: etcd grants its key again,
      // to a lower token, which the fence rejects.
      const usurper = leaseOf(await client.acquire(`${base}/across`, { ttl: 2000 }));
      assert.ok(usurper.token < acrossRestore.token);
      const across = new SqliteFence({ path: join(tmp.dir, 'fence.db'), table: 'across' });
      assert.equal(across.apply('x', acrossRestore.token, () => undefined).status, 'applied');
      assert.equal(across.apply('x', usurper.token, () => undefined).status, 'stale_fence');
      across.close();
      await usurper.release();
      // The lease released after the snapshot is back, as a ghost holding its key.
      assert.equal((await client.inspect(`${base}/held`)).holder?.token, heldAtSnapshot.token);
      for (let i = 0; i < 2; i++) for (const key of keys) await round(client, key, t);
    } finally {
      await client.close();
      await store.close();
    }
    console.log(`etcd restore, not noticed: ${JSON.stringify(t)}`);
    // Revisions are cluster-wide: tokens repeat until etcd's revision passes each key's mark.
    assert.equal(t.grants, 6);
    assert.ok(t.staleAttempted >= 1, 'tokens repeat ones issued before the restore');
    assert.equal(t.staleRejected, t.staleAttempted);
    assert.equal(t.staleAccepted, 0);
  });

  it('`leasehold epoch` raises the floor: both instances grant again, every token above every earlier one', async () => {
    const url = `etcd://${cluster.endpoints.map((e) => e.replace(/^http:\/\//, '')).join(',')}`;
    const cli = spawnCli(['epoch', '--store', url, '--json']);
    assert.equal(await cli.exited, 0, cli.stderr());
    const report = JSON.parse(cli.stdout()) as { floor: string; rowsRaised: number };
    const floor = BigInt(report.floor);
    const highest = [...marks.values(), acrossRestore.token].reduce((a, b) => (a > b ? a : b));
    assert.ok(floor > highest, `floor ${floor} > ${highest}`);
    assert.ok(report.rowsRaised >= 1, 'the restored ghost was deleted');
    const fresh = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const freshClient = new LeaseClient({ store: fresh, ownerId: 'fresh' });
    const t = tally();
    try {
      for (let i = 0; i < 2; i++) {
        for (const key of [...keys, `${base}/new`]) {
          for (const client of [livedClient, freshClient]) {
            const token = await round(client, key, t);
            assert.ok(token !== undefined && token > floor, `${key}: ${token} > ${floor}`);
          }
        }
      }
      // The ghost is gone; a new owner of the key outranks the lease from before the restore.
      const held = leaseOf(await freshClient.acquire(`${base}/held`, { ttl: 2000 }));
      assert.ok(held.token > floor);
      await held.release();
      const taken = leaseOf(await freshClient.acquire(`${base}/across`, { ttl: 2000 }));
      assert.ok(taken.token > acrossRestore.token);
      await taken.release();
    } finally {
      await freshClient.close();
      await fresh.close();
    }
    await acrossRestore.release(); // not_owner: it ended at the restore
    console.log(`etcd restore + epoch: ${JSON.stringify(t)}, floor ${floor}`);
    assert.equal(t.refused, 0);
    assert.equal(t.grants, 16);
    assert.equal(t.staleAttempted, 0);
    assert.equal(t.staleAccepted, 0);
  });
});
