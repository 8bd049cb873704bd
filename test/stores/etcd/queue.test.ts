import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { Lease } from '../../../src/core/lease.js';
import type { AcquireResult } from '../../../src/core/results.js';
import type { StoreAcquireRequest, StoreQueuedOptions } from '../../../src/core/store.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import { etcdctl, type Ctl } from '../../support/etcdctl.js';
import { uniqueKey } from '../../support/keys.js';
import { eventually } from '../../support/time.js';

const WAITER = fileURLToPath(new URL('./queue-waiter.js', import.meta.url));

function leaseOf(r: AcquireResult, what = 'acquire'): Lease {
  assert.equal(
    r.status,
    'acquired',
    `${what} should be acquired, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  return r.lease;
}

/** A running etcdctl with its output so far. */

/** Stops etcdctl: SIGINT lets it close its session (revoking its lease). */
async function stopCtl(ctl: Ctl): Promise<void> {
  if (ctl.proc.exitCode !== null || ctl.proc.signalCode !== null) return;
  ctl.proc.kill('SIGINT');
  const t = setTimeout(() => ctl.proc.kill('SIGKILL'), 5000);
  await ctl.exited;
  clearTimeout(t);
}

/** A waiter process (queue-waiter.ts) and the events it printed. */
interface WaiterProc {
  readonly proc: ChildProcess;
  readonly events: Array<{ ev: string; token?: string }>;
  readonly exited: Promise<number | null>;
}

describe('etcd queued waiting: FIFO in etcd, one wake-up per release, grants re-checked against a live session', () => {
  let cluster: EtcdCluster;
  let raw: Etcd3;
  const stores: EtcdLeaseStore[] = [];
  const clients: LeaseClient[] = [];
  const procs: ChildProcess[] = [];

  before(async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'queue' });
    raw = new Etcd3({ hosts: cluster.endpoints });
  });
  after(async () => {
    for (const p of procs) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGCONT');
        p.kill('SIGKILL');
      }
    }
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
    raw?.close();
    await cluster?.stop();
  });

  /** A store of its own (its own etcd client and sessions), as another process would have. */
  function openStore(): EtcdLeaseStore {
    const s = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    stores.push(s);
    return s;
  }

  /** A client over `store` that counts how often its waits were parked in etcd's queue. */
  function parkedClient(
    store: EtcdLeaseStore,
    ownerId: string,
  ): { client: LeaseClient; parks: () => number } {
    let parks = 0;
    const spied = Object.assign(Object.create(store) as EtcdLeaseStore, {
      acquireQueued: (r: StoreAcquireRequest, o: StoreQueuedOptions) =>
        store.acquireQueued(r, {
          ...o,
          onParked: () => {
            parks++;
            o.onParked?.();
          },
        }),
    });
    const client = new LeaseClient({ store: spied, ownerId, pollInterval: 60_000 });
    clients.push(client);
    return { client, parks: () => parks };
  }

  function plainClient(store: EtcdLeaseStore, ownerId: string): LeaseClient {
    const c = new LeaseClient({ store, ownerId, pollInterval: 60_000 });
    clients.push(c);
    return c;
  }

  /** Entries under `name/` in create order, as etcd sees them. */
  async function entries(
    name: string,
  ): Promise<Array<{ key: string; rev: bigint; lease: string; value: string }>> {
    const res = await raw.getAll().prefix(`${name}/`).sort('Create', 'Ascend').exec();
    return res.kvs.map((kv) => ({
      key: kv.key.toString(),
      rev: BigInt(kv.create_revision),
      lease: String(kv.lease),
      value: kv.value.toString(),
    }));
  }

  function spawnWaiter(cfg: {
    key: string;
    ttlMs: number;
    waitMs: number;
    id: string;
  }): WaiterProc {
    const proc = spawn(
      process.execPath,
      [WAITER, JSON.stringify({ ...cfg, endpoints: cluster.endpoints })],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    procs.push(proc);
    const w: WaiterProc = {
      proc,
      events: [],
      exited: new Promise((resolve) => proc.on('exit', (code) => resolve(code))),
    };
    let buf = '';
    proc.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() !== '') w.events.push(JSON.parse(line) as { ev: string; token?: string });
      }
    });
    return w;
  }

  const count = (w: WaiterProc, ev: string): number => w.events.filter((e) => e.ev === ev).length;

  it('waiters of five stores are granted in the order they queued, each with its own entry as token, valid from after the release', async () => {
    const key = uniqueKey('fifo');
    const holder = plainClient(openStore(), 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const N = 5;
    const ttl = 10_000;
    const grants: Array<{ i: number; token: bigint; validFrom: number }> = [];
    const releaseSentAt: number[] = [];
    let inside = 0;
    let maxInside = 0;
    const queuedRevs: bigint[] = [];
    const done: Array<Promise<void>> = [];
    for (let i = 0; i < N; i++) {
      const { client, parks } = parkedClient(openStore(), `w${i}`);
      done.push(
        client.acquire(key, { ttl, wait: 60_000 }).then(async (r) => {
          const lease = leaseOf(r, `waiter ${i}`);
          inside++;
          maxInside = Math.max(maxInside, inside);
          // deadline = validFrom + ttl − (ceil(ttl × 1%) + 2)
          grants.push({ i, token: lease.token, validFrom: lease.deadline - ttl + 102 });
          await new Promise((res) => setImmediate(res));
          inside--;
          releaseSentAt[i + 1] = client.now();
          assert.equal((await lease.release()).status, 'released');
        }),
      );
      // The next waiter starts only once this one's entry is in etcd and it is parked.
      await eventually(`waiter ${i} to park`, () => (parks() >= 1 ? true : undefined));
      const e = await entries(key);
      assert.equal(e.length, i + 2, `waiter ${i} has its own entry`);
      queuedRevs.push(e[i + 1]!.rev);
    }
    releaseSentAt[0] = holder.now();
    await h.release();
    await Promise.all(done);
    assert.equal(maxInside, 1, 'two waiters held the key at once');
    assert.deepEqual(
      grants.map((g) => g.i),
      [0, 1, 2, 3, 4],
      'granted in queue order',
    );
    assert.deepEqual(
      grants.map((g) => g.token),
      queuedRevs,
      "each token is the create revision of the waiter's own entry",
    );
    for (let i = 1; i < N; i++) assert.ok(grants[i]!.token > grants[i - 1]!.token);
    assert.ok(grants[0]!.token > h.token);
    for (const g of grants) {
      // The deadline counts from the re-check after the predecessor left, not from the enqueue.
      assert.ok(
        g.validFrom >= releaseSentAt[g.i]!,
        `waiter ${g.i}: validFrom ${g.validFrom.toFixed(1)} precedes its predecessor's release ${releaseSentAt[g.i]!.toFixed(1)}`,
      );
    }
    assert.deepEqual(await entries(key), [], 'every entry is gone after the releases');
    const state = await holder.inspect(key);
    assert.equal(state.lastToken, grants[N - 1]!.token, 'the last grant is recorded');
  });

  it('waiters of one store queue in order too, each in its own session lane', async () => {
    const key = uniqueKey('lanes');
    const store = openStore();
    const holder = plainClient(store, 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const { client, parks } = parkedClient(store, 'waiters');
    const order: number[] = [];
    const done: Array<Promise<void>> = [];
    for (let i = 0; i < 3; i++) {
      done.push(
        client.acquire(key, { ttl: 10_000, wait: 60_000 }).then(async (r) => {
          const lease = leaseOf(r, `waiter ${i}`);
          order.push(i);
          await lease.release();
        }),
      );
      await eventually(`waiter ${i} to park`, () => (parks() >= i + 1 ? true : undefined));
    }
    const e = await entries(key);
    assert.equal(e.length, 4);
    assert.equal(new Set(e.map((x) => x.lease)).size, 4, 'one etcd lease (session) per entry');
    // A try-acquire of the same store meanwhile is busy and writes nothing.
    assert.equal((await holder.acquire(key, { ttl: 10_000 })).status, 'busy');
    assert.equal((await entries(key)).length, 4);
    await h.release();
    await Promise.all(done);
    assert.deepEqual(order, [0, 1, 2]);
  });

  it('a release wakes only the next waiter: the others make no etcd read', async () => {
    const key = uniqueKey('herd');
    const holder = plainClient(openStore(), 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const N = 4;
    const waiterStores: EtcdLeaseStore[] = [];
    const granted: Array<Promise<Lease>> = [];
    for (let i = 0; i < N; i++) {
      const s = openStore();
      waiterStores.push(s);
      const { client, parks } = parkedClient(s, `w${i}`);
      granted.push(client.acquire(key, { ttl: 10_000, wait: 60_000 }).then((r) => leaseOf(r)));
      await eventually(`waiter ${i} to park`, () => (parks() >= 1 ? true : undefined));
    }
    let reads = waiterStores.map((s) => s.queuedReads);
    let release: () => Promise<unknown> = () => h.release();
    for (let i = 0; i < N; i++) {
      await release();
      const lease = await granted[i]!;
      const now = waiterStores.map((s) => s.queuedReads);
      for (let j = 0; j < N; j++) {
        const delta = now[j]! - reads[j]!;
        assert.equal(
          delta,
          j === i ? 1 : 0,
          `release ${i}: waiter ${j} made ${delta} reads (only waiter ${i} may re-check, once)`,
        );
      }
      reads = now;
      release = () => lease.release();
    }
    await release();
  });

  it('interop: `etcdctl lock` queued behind leasehold gets the key before a later leasehold waiter, and the other way round', async () => {
    const key = uniqueKey('interop-queue');
    const holder = plainClient(openStore(), 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const e1 = etcdctl(cluster.endpoints, ['lock', key]);
    let e2: Ctl | undefined;
    try {
      await eventually('etcdctl to queue', async () =>
        (await entries(key)).length === 2 ? true : undefined,
      );
      const { client, parks } = parkedClient(openStore(), 'after-etcdctl');
      let settled = false;
      const waiting = client.acquire(key, { ttl: 10_000, wait: 60_000 }).finally(() => {
        settled = true;
      });
      await eventually('leasehold waiter to park', () => (parks() >= 1 ? true : undefined));
      const queued = await entries(key);
      assert.equal(queued.length, 3);
      await h.release();
      // etcdctl prints its entry's key once it holds the lock.
      await eventually('etcdctl to hold', () => (e1.out.includes(`${key}/`) ? true : undefined));
      assert.equal(settled, false, 'the leasehold waiter queued after etcdctl still waits');
      await stopCtl(e1);
      const l = leaseOf(await waiting);
      assert.equal(l.token, queued[2]!.rev, "granted on its own entry's revision");
      // Now the other way round: an etcdctl waiter queued behind a leasehold waiter.
      const { client: c2, parks: parks2 } = parkedClient(openStore(), 'before-etcdctl');
      let settled2 = false;
      const waiting2 = c2.acquire(key, { ttl: 10_000, wait: 60_000 }).finally(() => {
        settled2 = true;
      });
      await eventually('second leasehold waiter to park', () => (parks2() >= 1 ? true : undefined));
      e2 = etcdctl(cluster.endpoints, ['lock', key]);
      await eventually('second etcdctl to queue', async () =>
        (await entries(key)).length === 3 ? true : undefined,
      );
      assert.equal(settled2, false);
      await l.release();
      const l2 = leaseOf(await waiting2);
      assert.ok(!e2.out.includes(`${key}/`), 'etcdctl queued later does not hold yet');
      assert.equal(e2.proc.exitCode, null);
      await l2.release();
      await eventually('second etcdctl to hold', () =>
        e2!.out.includes(`${key}/`) ? true : undefined,
      );
    } finally {
      await stopCtl(e1);
      if (e2 !== undefined) await stopCtl(e2);
    }
  });

  it('a waiter whose session lease is revoked while it waits is not granted on the dead entry: it queues again with a larger token', async () => {
    const key = uniqueKey('revoked');
    const holder = plainClient(openStore(), 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const { client, parks } = parkedClient(openStore(), 'revoked');
    const waiting = client.acquire(key, { ttl: 10_000, wait: 60_000 });
    await eventually('waiter to park', () => (parks() >= 1 ? true : undefined));
    const [, first] = await entries(key);
    assert.ok(first !== undefined);
    await raw.leaseClient.leaseRevoke({ ID: first.lease });
    await eventually('waiter to queue again', () => (parks() >= 2 ? true : undefined));
    const again = await entries(key);
    assert.equal(again.length, 2, 'one entry per waiter: the dead one is gone');
    assert.ok(again[1]!.rev > first.rev);
    assert.notEqual(again[1]!.lease, first.lease, 'on a new session');
    await h.release();
    const l = leaseOf(await waiting);
    assert.equal(l.token, again[1]!.rev);
    await l.release();
  });

  it('Jepsen etcd 3.4.3: a waiter paused past its TTL, whose predecessor leaves meanwhile, is never granted on its dead entry and never overlaps the next holder', async () => {
    const key = uniqueKey('jepsen');
    const holder = plainClient(openStore(), 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const w = spawnWaiter({ key, ttlMs: 1000, waitMs: 60_000, id: 'paused' });
    try {
      await eventually(
        'the waiter process to park',
        () => (count(w, 'parked') >= 1 ? true : undefined),
        {
          timeoutMs: 20_000,
        },
      );
      const [, wEntry] = await entries(key);
      assert.ok(wEntry !== undefined);
      const { client: x, parks } = parkedClient(openStore(), 'next');
      const xWaiting = x.acquire(key, { ttl: 10_000, wait: 60_000 });
      await eventually('X to park', () => (parks() >= 1 ? true : undefined));
      w.proc.kill('SIGSTOP');
      // Stopped, the waiter sends no keepalive: its 1 s session (+1 s headroom) expires at
      // etcd, which deletes its entry.
      await eventually(
        "the paused waiter's entry to expire",
        async () => ((await entries(key)).some((e) => e.key === wEntry.key) ? undefined : true),
        { timeoutMs: 15_000, intervalMs: 100 },
      );
      // Its predecessor leaves while it cannot see it: X, queued after it, is the head now.
      await h.release();
      const xl = leaseOf(await xWaiting);
      assert.ok(xl.token > wEntry.rev);
      w.proc.kill('SIGCONT');
      // Resumed, it sees the deletion it was watching, re-checks, finds its place gone, and
      // queues again behind X instead of taking the key (etcd 3.4.3's lock granted it).
      await eventually('the resumed waiter to queue again', () =>
        count(w, 'parked') >= 2 ? true : undefined,
      );
      const now = await entries(key);
      assert.equal(now.length, 2);
      assert.equal(now[0]!.rev, xl.token, 'X holds');
      assert.ok(now[1]!.rev > xl.token, 'the resumed waiter is behind X with a new entry');
      assert.equal(count(w, 'granted'), 0, 'no grant while X holds');
      await xl.release();
      const g = await eventually('the resumed waiter to be granted', () =>
        w.events.find((e) => e.ev === 'granted'),
      );
      assert.equal(BigInt(g.token!), now[1]!.rev);
      assert.notEqual(BigInt(g.token!), wEntry.rev, 'never the dead entry');
      w.proc.stdin!.write('release\n');
      assert.equal(await w.exited, 0);
      assert.equal(count(w, 'released'), 1);
    } finally {
      w.proc.kill('SIGCONT');
    }
  });

  it("a timed-out wait, an aborted wait and a closed client remove the waiter's entry from etcd", async () => {
    const key = uniqueKey('leave');
    const holder = plainClient(openStore(), 'holder');
    const h = leaseOf(await holder.acquire(key, { ttl: 10_000 }));
    const { client, parks } = parkedClient(openStore(), 'leaver');
    const t0 = performance.now();
    const timedOut = await client.acquire(key, { ttl: 10_000, wait: 400 });
    assert.ok(performance.now() - t0 >= 390, 'a bounded wait lasts its bound');
    assert.equal(timedOut.status, 'busy');
    assert.equal(timedOut.status === 'busy' ? timedOut.holder.token : 0n, h.token);
    assert.equal(parks(), 1);
    assert.deepEqual(
      (await entries(key)).map((e) => e.rev),
      [h.token],
      'the timed-out waiter left the queue',
    );

    const controller = new AbortController();
    const aborted = client.acquire(key, { ttl: 10_000, wait: 60_000, signal: controller.signal });
    await eventually('waiter to park', () => (parks() >= 2 ? true : undefined));
    assert.equal((await entries(key)).length, 2);
    controller.abort(new Error('operator cancelled'));
    await assert.rejects(aborted, (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'));
    await eventually('the aborted entry to go', async () =>
      (await entries(key)).length === 1 ? true : undefined,
    );

    // Abort in the middle of the queue: the waiter behind re-checks and waits for the holder.
    const c1 = parkedClient(openStore(), 'middle');
    const mid = new AbortController();
    const midWaiting = c1.client.acquire(key, { ttl: 10_000, wait: 60_000, signal: mid.signal });
    await eventually('middle to park', () => (c1.parks() >= 1 ? true : undefined));
    const c2 = parkedClient(openStore(), 'last');
    const lastWaiting = c2.client.acquire(key, { ttl: 10_000, wait: 60_000 });
    await eventually('last to park', () => (c2.parks() >= 1 ? true : undefined));
    mid.abort();
    await assert.rejects(midWaiting, (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'));
    await eventually('last to park again behind the holder', () =>
      c2.parks() >= 2 ? true : undefined,
    );
    assert.equal((await entries(key)).length, 2);

    const closing = parkedClient(openStore(), 'closing');
    const closed = closing.client.acquire(key, { ttl: 10_000, wait: 60_000 });
    await eventually('closing waiter to park', () => (closing.parks() >= 1 ? true : undefined));
    assert.equal((await entries(key)).length, 3);
    await closing.client.close();
    await assert.rejects(closed, (err: unknown) => isLeaseholdError(err, 'ERR_CLOSED'));
    await eventually('the closed waiter entry to go', async () =>
      (await entries(key)).length === 2 ? true : undefined,
    );

    await h.release();
    const last = leaseOf(await lastWaiting);
    await last.release();
    assert.deepEqual(await entries(key), []);
  });
});
