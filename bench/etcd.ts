import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../src/core/client.js';
import { ForwardingLeaseStore } from '../src/testing/forwarding-store.js';
import type { Lease } from '../src/core/lease.js';
import { EtcdLeaseStore } from '../src/stores/etcd/store.js';
import { EtcdCluster } from '../test/support/etcd-cluster.js';
import { inProcessHandoff } from './handoff.js';
import { measureCycles, percentile, type BenchOptions, type BenchResult } from './lib.js';

const SUITE = 'etcd';

/** Acquire+release cycles on distinct keys at 1 and 32 workers. */
async function cycles(
  subject: string,
  opts: BenchOptions,
  cycle: (key: string) => Promise<void>,
  notes: string,
): Promise<BenchResult[]> {
  const out: BenchResult[] = [];
  const run = randomUUID().slice(0, 8);
  for (const workers of [1, 32]) {
    const m = await measureCycles(workers, opts.durationMs, (w) => cycle(`bench/${run}/k${w}`));
    out.push({ suite: SUITE, subject, scenario: 'cycle', workers, keys: 'distinct', ...m, notes });
    console.error(`bench: etcd ${subject} ${workers}w: ${m.cyclesPerSec.toFixed(0)}/s`);
  }
  return out;
}

/**
 * Holds `n` leases from one client (ttl 3 s, renewed every second) and measures, over a few
 * renewal intervals, the etcd keepalive requests sent and the client's CPU time.
 */
export async function renewTraffic(
  endpoints: string[],
  n: number,
  windowMs: number,
): Promise<BenchResult> {
  const store = new EtcdLeaseStore({ hosts: endpoints, minTtlMs: 1000 });
  const client = new LeaseClient({ store, ownerId: 'holder', requestTimeout: '30s' });
  const run = randomUUID().slice(0, 8);
  const leases: Lease[] = [];
  const t0 = performance.now();
  let retried = 0;
  for (let i = 0; i < n; i += 64) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(64, n - i) }, async (_, j) => {
        // On a loaded machine an acquire can outlast its ttl window; retry a few times.
        for (let attempt = 0; ; attempt++) {
          const r = await client.acquire(`bench/${run}/held/${i + j}`, {
            ttl: 3000,
            renewEvery: 1000,
          });
          if (r.status === 'acquired') return r.lease;
          if (attempt >= 5) throw new Error(`renew-traffic acquire: ${r.status}`);
          retried++;
        }
      }),
    );
    leases.push(...batch);
  }
  const acquireMs = performance.now() - t0;
  let renewals = 0;
  const off = client.on('renewed', () => renewals++);
  let lost = 0;
  const offLost = client.on('lost', () => lost++);
  // Let renewal phases spread out first.
  await new Promise((r) => setTimeout(r, 1200));
  const k0 = store.keepAlivesSent;
  const r0 = renewals;
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  await new Promise((r) => setTimeout(r, windowMs));
  const elapsed = performance.now() - w0;
  const cpu = process.cpuUsage(cpu0);
  const keepAlives = store.keepAlivesSent - k0;
  const renewed = renewals - r0;
  off();
  offLost();
  await Promise.all(leases.map((l) => l.release()));
  await client.close();
  await store.close();
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const perSec = (x: number): number => (x / elapsed) * 1000;
  console.error(
    `bench: etcd renew-traffic ${n} leases: ${perSec(keepAlives).toFixed(1)} keepalives/s, ${perSec(renewed).toFixed(0)} renewals/s, ${perSec(cpuMs).toFixed(0)} ms CPU/s`,
  );
  return {
    suite: SUITE,
    subject: 'leasehold',
    scenario: `renew-traffic (${n} leases)`,
    workers: 1,
    keys: 'distinct',
    cyclesPerSec: perSec(renewed),
    cpuMsPer1000: renewed > 0 ? (cpuMs / renewed) * 1000 : undefined,
    notes:
      `${n} leases held (ttl 3s, renew every 1s): ${perSec(keepAlives).toFixed(1)} etcd keepalive requests/s, ` +
      `client CPU ${perSec(cpuMs).toFixed(0)} ms/s, ${lost} lost; acquiring them took ${(acquireMs / 1000).toFixed(1)}s (${retried} retried)`,
  };
}

/** One contender of a handoff chain: waits for the key, and returns how to give it back. */
interface ChainWorker {
  acquire(): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * A handoff chain: `workers` contenders (each with its own etcd client, as separate processes
 * would be) take turns on one key, each holding it `holdMs` and then releasing; the others
 * wait meanwhile. A sample is the time from a release being sent to the next holder holding.
 * With holds under 100 ms, a waiter whose watch started in the past (an etcd "unsynced"
 * watcher) is served only by etcd's 100 ms catch-up loop.
 */
async function chainHandoff(
  subject: string,
  workers: number,
  holdMs: number,
  handoffs: number,
  open: (worker: number) => Promise<ChainWorker>,
  notes: string,
): Promise<BenchResult> {
  const ws = await Promise.all(Array.from({ length: workers }, (_, i) => open(i)));
  const samples: number[] = [];
  let releaseSentAt: number | undefined;
  let grants = 0;
  let holding = 0;
  const deadline = performance.now() + 120_000;
  try {
    await Promise.all(
      ws.map(async (w) => {
        while (grants < handoffs + 1 && performance.now() < deadline) {
          const release = await w.acquire();
          const at = performance.now();
          if (++holding > 1) throw new Error(`${subject}: two holders at once`);
          if (releaseSentAt !== undefined) samples.push(at - releaseSentAt);
          grants++;
          if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
          holding--;
          releaseSentAt = performance.now();
          await release();
        }
      }),
    );
  } finally {
    await Promise.all(ws.map((w) => w.close()));
  }
  if (samples.length < handoffs)
    throw new Error(`${subject}: only ${samples.length} of ${handoffs} handoffs in time`);
  const p50 = percentile(samples, 50);
  const p99 = percentile(samples, 99);
  console.error(
    `bench: etcd handoff chain ${subject} hold ${holdMs}ms: p50 ${p50.toFixed(1)}ms p99 ${p99.toFixed(1)}ms`,
  );
  return {
    suite: SUITE,
    subject,
    scenario: `handoff chain (hold ${holdMs} ms)`,
    workers,
    keys: 'hot',
    p50Ms: p50,
    p99Ms: p99,
    notes: `${samples.length} handoffs among ${workers} contenders, release sent → next holder holds; ${notes}`,
  };
}

/**
 * leasehold waiters, each with its own store (etcd client and sessions): in etcd's queue, or
 * (`queued: false`) through the client's generic try / watch / re-check loop, which a store
 * without the queueing capability gets.
 */
function leaseholdChain(endpoints: string[], key: string, queued: boolean) {
  return (i: number): Promise<ChainWorker> => {
    const store = new EtcdLeaseStore({ hosts: endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({
      store: queued ? store : new ForwardingLeaseStore(store),
      ownerId: `chain-${i}`,
    });
    return Promise.resolve({
      async acquire() {
        const r = await client.acquire(key, { ttl: 10_000, wait: 60_000 });
        if (r.status !== 'acquired') throw new Error(`chain acquire: ${r.status}`);
        return async () => {
          await r.lease.release();
        };
      },
      async close() {
        await client.close();
        await store.close();
      },
    });
  };
}

/** etcd3's own `Election` (etcd's recipe in the etcd3 package), campaign + resign per turn. */
function etcd3ElectionChain(endpoints: string[], name: string) {
  return (): Promise<ChainWorker> => {
    const c = new Etcd3({ hosts: endpoints });
    const election = c.election(name, 10);
    return Promise.resolve({
      async acquire() {
        const campaign = election.campaign('x');
        await campaign.wait();
        return () => campaign.resign();
      },
      close() {
        c.close();
        return Promise.resolve();
      },
    });
  };
}

/**
 * etcd: leasehold's store (etcd's Mutex recipe, shared sessions) against etcd3's own `Lock`
 * (one lease grant + put-if-absent + revoke per cycle, try-only) and the raw put/delete pair,
 * on one throwaway single-node etcd; then handoff latency and renewal traffic for many leases.
 */
export async function etcdBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const cluster = await EtcdCluster.start({ size: 1, label: 'bench' });
  const results: BenchResult[] = [];
  const raw = new Etcd3({ hosts: cluster.endpoints });
  try {
    results.push(
      ...(await cycles(
        'raw put + delete',
        opts,
        async (key) => {
          await raw.put(key).value('x');
          await raw.delete().key(key);
        },
        'floor: two writes, no lease, no exclusion',
      )),
    );
    results.push(
      ...(await cycles(
        'etcd3 Lock (try-only)',
        opts,
        async (key) => {
          const lock = raw.lock(key).ttl(30);
          await lock.acquire();
          await lock.release();
        },
        'lease grant + txn put-if-absent, release = lease revoke',
      )),
    );
    const store = new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 });
    const client = new LeaseClient({ store, ownerId: 'bench' });
    results.push(
      ...(await cycles(
        'leasehold',
        opts,
        async (key) => {
          const r = await client.acquire(key, { ttl: 30_000 });
          if (r.status !== 'acquired') throw new Error(`bench acquire: ${r.status}`);
          await r.lease.release();
        },
        'txn put-if-absent on a shared session, release = conditional txn delete',
      )),
    );
    await client.close();
    await store.close();
    const endpoints = cluster.endpoints;
    results.push(
      await inProcessHandoff(
        SUITE,
        'leasehold',
        () => new EtcdLeaseStore({ hosts: endpoints, minTtlMs: 1000 }),
        opts.quick ? 30 : 150,
        { scenario: 'handoff', notes: 'release sent → waiter holds (woken by etcd watch)' },
      ),
    );
    const chainRounds = opts.quick ? 40 : 200;
    for (const holdMs of [0, 20, 150]) {
      const run = randomUUID().slice(0, 8);
      results.push(
        await chainHandoff(
          'leasehold',
          4,
          holdMs,
          chainRounds,
          leaseholdChain(endpoints, `bench/${run}/chain`, true),
          "etcd's lock queue: watch of the predecessor's deletion, re-check (keepalive ‖ txn)",
        ),
      );
      results.push(
        await chainHandoff(
          'leasehold (client loop)',
          4,
          holdMs,
          chainRounds,
          leaseholdChain(endpoints, `bench/${run}/loop`, false),
          'no queue at etcd: every waiter watches KEY/ and re-tries on each change',
        ),
      );
      results.push(
        await chainHandoff(
          'etcd3 Election',
          4,
          holdMs,
          opts.quick ? 20 : 60,
          etcd3ElectionChain(endpoints, `bench-${run}`),
          'lease grant + put per campaign, watch of the predecessor from the read revision, resign = revoke',
        ),
      );
    }
    for (const n of opts.quick ? [100, 1000] : [100, 1000, 10_000]) {
      results.push(await renewTraffic(cluster.endpoints, n, opts.quick ? 2000 : 4000));
    }
  } finally {
    raw.close();
    await cluster.stop();
  }
  return results;
}
