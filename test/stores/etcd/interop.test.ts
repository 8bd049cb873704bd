import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../../../src/core/client.js';
import { Election } from '../../../src/core/election.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import { etcdctl, type Ctl } from '../../support/etcdctl.js';
import { uniqueKey } from '../../support/keys.js';
import { eventually } from '../../support/time.js';

/** A running etcdctl with its output so far. */

/** Stops etcdctl: SIGINT lets it close its session (revoking its lease); SIGKILL is a crash. */
async function stopCtl(ctl: Ctl, signal: 'SIGINT' | 'SIGKILL' = 'SIGINT'): Promise<void> {
  if (ctl.proc.exitCode !== null || ctl.proc.signalCode !== null) return;
  ctl.proc.kill(signal);
  const t = setTimeout(() => ctl.proc.kill('SIGKILL'), 5000);
  await ctl.exited;
  clearTimeout(t);
}

describe('etcd interop: leasehold and etcdctl lock/elect exclude each other', () => {
  let cluster: EtcdCluster;
  let store: EtcdLeaseStore;
  let client: LeaseClient;
  let raw: Etcd3;
  before(async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'interop' });
    store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    client = new LeaseClient({ store, ownerId: 'leasehold-test' });
    raw = new Etcd3({ hosts: cluster.endpoints });
  });
  after(async () => {
    await client?.close();
    await store?.close();
    raw?.close();
    await cluster?.stop();
  });

  /** Entries under `name/` in create order. */
  async function entries(name: string): Promise<Array<{ key: string; rev: bigint }>> {
    const res = await raw.getAll().prefix(`${name}/`).sort('Create', 'Ascend').exec();
    return res.kvs.map((kv) => ({ key: kv.key.toString(), rev: BigInt(kv.create_revision) }));
  }

  it('while `etcdctl lock NAME` holds, a leasehold acquire of NAME is busy; after it ends, leasehold acquires', async () => {
    const name = uniqueKey('interop-lock');
    const ctl = etcdctl(cluster.endpoints, ['lock', '--ttl', '2', name]);
    try {
      // etcdctl prints its entry's key once it holds the lock.
      await eventually('etcdctl to hold the lock', () =>
        ctl.out.includes(`${name}/`) ? true : undefined,
      );
      const [held] = await entries(name);
      assert.ok(held !== undefined);
      const r = await client.acquire(name, { ttl: 5000 });
      assert.equal(r.status, 'busy', `expected busy, got ${r.status}`);
      if (r.status !== 'busy') return;
      assert.equal(r.holder.token, held.rev, "the holder's token is etcdctl's entry revision");
      assert.match(r.holder.ownerId, /^etcd-lease\/[0-9a-f]+$/);
      assert.equal(r.holder.value, undefined);
      assert.equal((await entries(name)).length, 1, 'a busy answer wrote nothing');
    } finally {
      await stopCtl(ctl, 'SIGKILL');
    }
    // etcdctl crashed: its 2 s session expires at etcd, the deletion wakes our waiter.
    const r2 = await client.acquire(name, { ttl: 5000, wait: 30_000 });
    assert.equal(r2.status, 'acquired');
    if (r2.status === 'acquired') await r2.lease.release();
  });

  it('while leasehold holds NAME, `etcdctl lock NAME cmd` queues behind it and runs only after our release', async () => {
    const name = uniqueKey('interop-wait');
    const r = await client.acquire(name, { ttl: 5000 });
    assert.equal(r.status, 'acquired');
    if (r.status !== 'acquired') return;
    const ctl = etcdctl(cluster.endpoints, ['lock', name, 'echo', 'etcdctl-ran']);
    try {
      // etcdctl's waiter entry appears behind ours: it is queued, not holding.
      const queued = await eventually('etcdctl to queue', async () => {
        const e = await entries(name);
        return e.length === 2 ? e : undefined;
      });
      assert.equal(queued[0]!.rev, r.lease.token, 'our entry is first');
      assert.ok(queued[1]!.rev > r.lease.token);
      assert.equal(ctl.proc.exitCode, null, 'etcdctl is still blocked');
      assert.ok(!ctl.out.includes('etcdctl-ran'), 'its command has not run');
      assert.equal(
        (await r.lease.renew()).status,
        'renewed',
        'a queued waiter does not disturb the holder',
      );
      assert.equal((await r.lease.release()).status, 'released');
      const code = await Promise.race([
        ctl.exited,
        new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), 15_000).unref()),
      ]);
      assert.equal(code, 0, `etcdctl should run its command and exit 0; output: ${ctl.out}`);
      assert.ok(ctl.out.includes('etcdctl-ran'));
    } finally {
      await stopCtl(ctl);
    }
  });

  it('an `etcdctl elect` leader is seen by leasehold observers with its proposal as value, and blocks leasehold candidates', async () => {
    const name = uniqueKey('interop-elect');
    const election = new Election({ client, name, ttl: '5s' });
    const ctl = etcdctl(cluster.endpoints, ['elect', election.key, 'proposal-7']);
    try {
      await eventually('etcdctl to lead', () =>
        ctl.out.includes('proposal-7') ? true : undefined,
      );
      const view = await election.leader();
      assert.equal(view.leader?.value, 'proposal-7');
      const [entry] = await entries(election.key);
      assert.equal(view.leader?.epoch, entry!.rev);
      const r = await election.campaign({ wait: '300ms' });
      assert.equal(r.status, 'busy');
    } finally {
      await stopCtl(ctl);
    }
    const r = await election.campaign({ wait: '30s', value: 'leasehold-leader' });
    assert.equal(r.status, 'elected');
    if (r.status !== 'elected') return;
    // `etcdctl elect -l` observes leasehold's leader (value shown in leasehold's envelope).
    const obs = etcdctl(cluster.endpoints, ['elect', '-l', election.key]);
    try {
      await eventually('etcdctl to observe', () =>
        obs.out.includes('leasehold-leader') ? true : undefined,
      );
    } finally {
      await stopCtl(obs);
      await r.leadership.resign();
    }
  });
});
