// `npm run bench -- --only slots`: a semaphore slot's acquire/release cycle against a key's on
// the same store (target ≥ 0.8×), and against redis-semaphore's counting Semaphore on Redis
// (target ≥ 1.0×). W workers share one semaphore of W slots, so every slot is wanted: a pass
// meets busy slots, which is the cost a slot pays over a key of one's own.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Semaphore } from 'redis-semaphore';
import { LeaseClient } from '../src/core/client.js';
import type { LeaseStore } from '../src/core/store.js';
import { RedisLeaseStore } from '../src/stores/redis/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';
import { fmt, measureCycles, type BenchOptions, type BenchResult } from './lib.js';

const REDIS_URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const TTL_MS = 30_000;
const WORKERS = [1, 8] as const;

type Cycle = (worker: number) => Promise<void>;

function keyCycle(client: LeaseClient, run: string): Cycle {
  return async (w) => {
    const r = await client.acquire(`${run}/k${w}`, { ttl: TTL_MS, wait: TTL_MS });
    if (r.status !== 'acquired') throw new Error(`bench key acquire: ${r.status}`);
    await r.lease.release();
  };
}

function slotCycle(client: LeaseClient, run: string, limit: number): Cycle {
  return async () => {
    const r = await client.acquireSlot(`${run}/sem`, { limit, ttl: TTL_MS, wait: TTL_MS });
    if (r.status !== 'acquired') throw new Error(`bench slot acquire: ${r.status}`);
    await r.lease.release();
  };
}

/** Key rows and slot rows on one store, interleaved so load on the machine hits both. */
async function keyVsSlot(
  storeName: string,
  store: LeaseStore,
  opts: BenchOptions,
): Promise<BenchResult[]> {
  const out: BenchResult[] = [];
  const client = new LeaseClient({ store, ownerId: 'bench' });
  try {
    for (const workers of WORKERS) {
      const run = `bench-slots/${randomBytes(3).toString('hex')}`;
      const key = await measureCycles(workers, opts.durationMs, keyCycle(client, run));
      const slot = await measureCycles(workers, opts.durationMs, slotCycle(client, run, workers));
      const ratio = slot.cyclesPerSec / key.cyclesPerSec;
      out.push(
        {
          suite: 'slots',
          subject: `${storeName}: key`,
          scenario: 'cycle',
          workers,
          keys: 'distinct',
          ...key,
        },
        {
          suite: 'slots',
          subject: `${storeName}: slot of ${workers}`,
          scenario: 'cycle',
          workers,
          keys: 'hot',
          ...slot,
          notes: `${fmt(ratio, 2)}× the key's cycles/s`,
        },
      );
      console.error(
        `bench slots ${storeName} ×${workers}: key ${fmt(key.cyclesPerSec)}/s, slot ${fmt(slot.cyclesPerSec)}/s (${fmt(ratio, 2)}×)`,
      );
    }
  } finally {
    await client.close();
  }
  return out;
}

/** Slot cycles on SQLite and Redis against key cycles, and redis-semaphore's Semaphore. */
export async function slotBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-bench-slots-'));
  const sqlite = new SqliteLeaseStore({ path: join(dir, 'leases.db') });
  try {
    results.push(...(await keyVsSlot('sqlite', sqlite, opts)));
  } finally {
    await sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const prefix = `leasehold-bench-slots:${process.pid}-${randomBytes(3).toString('hex')}:`;
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  const peer = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  const store = new RedisLeaseStore({ redis, prefix: `${prefix}lh:` });
  try {
    const ours = await keyVsSlot('redis', store, opts);
    results.push(...ours);
    for (const workers of WORKERS) {
      const m = await measureCycles(workers, opts.durationMs, async () => {
        const s = new Semaphore(peer, `${prefix}rs`, workers, {
          lockTimeout: TTL_MS,
          acquireTimeout: TTL_MS,
        });
        await s.acquire();
        await s.release();
      });
      const mine = ours.find((r) => r.workers === workers && r.subject.includes('slot'));
      const ratio = (mine?.cyclesPerSec ?? Number.NaN) / m.cyclesPerSec;
      results.push({
        suite: 'slots',
        subject: `redis-semaphore Semaphore of ${workers}`,
        scenario: 'cycle',
        workers,
        keys: 'hot',
        ...m,
        notes: `default options (polls every 10 ms while full); leasehold's slot ${fmt(ratio, 2)}× its cycles/s`,
      });
      console.error(`bench slots redis-semaphore ×${workers}: ${fmt(m.cyclesPerSec)}/s`);
    }
  } finally {
    await store.close();
    redis.disconnect();
    peer.disconnect();
  }
  return results;
}
