import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import { EtcdLeaseStore } from '../src/stores/etcd/store.js';
import { EtcdCluster } from '../test/support/etcd-cluster.js';
import { inProcessHandoff } from './handoff.js';
import { measureCycles, type BenchOptions, type BenchResult } from './lib.js';

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
    for (const n of opts.quick ? [100, 1000] : [100, 1000, 10_000]) {
      results.push(await renewTraffic(cluster.endpoints, n, opts.quick ? 2000 : 4000));
    }
  } finally {
    raw.close();
    await cluster.stop();
  }
  return results;
}
