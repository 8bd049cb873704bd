import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import { LeaseClient } from '../src/core/client.js';
import { LuaScript } from '../src/drivers/redis/lua-script.js';
import { RedisLeaseStore } from '../src/stores/redis/store.js';
import type { BenchOptions, BenchResult } from './lib.js';

const URL = process.env['LEASEHOLD_BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const TTL_MS = 10_000;

/** One acquire+release cycle on `key`. Resolves when the key has been released. */
type Cycle = (key: string) => Promise<void>;

interface Subject {
  readonly name: string;
  /** Makes the cycle function; `wait` = whether acquire must wait for a busy key. */
  readonly make: (wait: boolean) => Cycle;
  readonly hot: boolean;
  /** Measured on the hot key only. */
  readonly onlyHot?: boolean;
  readonly notes?: string;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;

const RAW = 'raw SET NX PX + DEL';

/** The floor rows' scripts (not leasehold's: they do the Redis work of its scripts, no logic). */
const EMPTY_SCRIPT = new LuaScript('floor-empty', 'return 1');
const COMMANDS_ACQUIRE = new LuaScript(
  'floor-acquire-commands',
  [
    "redis.call('HMGET', KEYS[1], 'id', 'exp', 'token', 'owner', 'v', 'own')",
    "redis.call('TIME')",
    "redis.call('HSET', KEYS[1], 'token', '1839106906769408', 'id', ARGV[1], 'owner', ARGV[2], 'exp', '1796002839642', 'v', ARGV[4])",
    "return {1, '1839106906769408', 1796002838642}",
  ].join('\n'),
);
const COMMANDS_RELEASE = new LuaScript(
  'floor-release-commands',
  [
    "redis.call('HMGET', KEYS[1], 'id', 'token', 'own')",
    "redis.call('HDEL', KEYS[1], 'id', 'owner', 'exp', 'v')",
    "redis.call('PUBLISH', ARGV[3], '')",
    'return 1',
  ].join('\n'),
);

/** A floor row: an acquire script and a release script run with leasehold's arguments. */
function floorSubject(
  name: string,
  notes: string,
  [acquire, release]: readonly [LuaScript, LuaScript],
  prefix: string,
  conn: () => Redis,
): Subject {
  return {
    name,
    hot: false,
    notes,
    make: () => {
      const redis = conn();
      return async (key) => {
        const k = `${prefix}{${key}}`;
        const id = randomUUID();
        await acquire.run(redis, [k], [id, 'bench', TTL_MS, '']);
        await release.run(redis, [k], [id, '1', `${k}:released`]);
      };
    },
  };
}

function medianOf(values: number[]): number {
  return round(
    percentile(
      [...values].sort((a, b) => a - b),
      50,
    ),
    3,
  );
}

interface Measured {
  readonly cyclesPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly cpuMsPer1000: number;
}

/** Runs `workers` loops of `cycle` for `durationMs`; per-cycle latency and client CPU. */
async function measure(
  cycle: Cycle,
  workers: number,
  hot: boolean,
  prefix: string,
  durationMs: number,
): Promise<Measured> {
  const latencies: number[] = [];
  // Warm-up: connections, script cache, JIT.
  const warmEnd = performance.now() + Math.min(500, durationMs / 4);
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const key = hot ? `${prefix}hot` : `${prefix}w${w}`;
      while (performance.now() < warmEnd) await cycle(key);
    }),
  );
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + durationMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const key = hot ? `${prefix}hot` : `${prefix}w${w}`;
      while (performance.now() < end) {
        const s = performance.now();
        await cycle(key);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  return {
    cyclesPerSec: round((latencies.length / elapsed) * 1000, 0),
    p50Ms: round(percentile(latencies, 50), 3),
    p99Ms: round(percentile(latencies, 99), 3),
    cpuMsPer1000: round(((cpu.user + cpu.system) / 1000 / latencies.length) * 1000, 1),
  };
}

/**
 * Redis benchmarks: leasehold against redis-semaphore's Mutex, redlock 4 on one instance and
 * the raw `SET NX PX` + `DEL` pair (the floor any Redis lock pays), in the same run over the
 * same Redis. Cycle = acquire + release; hot = every worker on one key (waiting), distinct =
 * one key per worker. Handoff = a holder's release until a parked waiter holds the key.
 */
export async function redisBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const durationMs = opts.quick ? Math.min(opts.durationMs, 1000) : opts.durationMs;
  const run = `leasehold-bench:${process.pid}-${randomBytes(3).toString('hex')}:`;
  const connections: Redis[] = [];
  const conn = (): Redis => {
    const r = new Redis(URL, { maxRetriesPerRequest: 1 });
    connections.push(r);
    return r;
  };
  const stores: RedisLeaseStore[] = [];
  const clients: LeaseClient[] = [];
  const results: BenchResult[] = [];
  try {
    const leaseholdStore = (): RedisLeaseStore => {
      const s = new RedisLeaseStore({ redis: conn(), prefix: `${run}lh:` });
      stores.push(s);
      return s;
    };
    const subjects: Subject[] = [
      {
        name: 'leasehold',
        hot: true,
        notes:
          'LeaseClient (autoRenew on) over RedisLeaseStore: EVALSHA acquire + release; hot key: hand-off between the 32 tasks of the client (one handoff.lua per change of holder)',
        make: (wait) => {
          const client = new LeaseClient({ store: leaseholdStore(), ownerId: 'bench' });
          clients.push(client);
          return async (key) => {
            const r = await client.acquire(key, { ttl: TTL_MS, wait: wait ? 30_000 : 0 });
            if (r.status !== 'acquired') throw new Error(`leasehold: ${r.status}`);
            await r.lease.release();
          };
        },
      },
      {
        name: 'leasehold, local successors 15',
        hot: true,
        onlyHot: true,
        notes:
          'LeaseClient({ localSuccessors: 15 }) (opt-in, decision 007): each store grant reserves 16 tokens and a release passes the key to the next of the 32 tasks with the next token, no store call; maxHandOffRun 16 as default, then an ordinary release',
        make: (wait) => {
          const client = new LeaseClient({
            store: leaseholdStore(),
            ownerId: 'bench',
            localSuccessors: 15,
          });
          clients.push(client);
          return async (key) => {
            const r = await client.acquire(key, { ttl: TTL_MS, wait: wait ? 30_000 : 0 });
            if (r.status !== 'acquired') throw new Error(`leasehold: ${r.status}`);
            await r.lease.release();
          };
        },
      },
      {
        name: 'leasehold, hand-off off',
        hot: true,
        onlyHot: true,
        notes: 'LeaseClient with maxHandOffRun 0: every release publishes and waiters re-check',
        make: (wait) => {
          const client = new LeaseClient({
            store: leaseholdStore(),
            ownerId: 'bench',
            maxHandOffRun: 0,
          });
          clients.push(client);
          return async (key) => {
            const r = await client.acquire(key, { ttl: TTL_MS, wait: wait ? 30_000 : 0 });
            if (r.status !== 'acquired') throw new Error(`leasehold: ${r.status}`);
            await r.lease.release();
          };
        },
      },
      {
        name: 'leasehold store only',
        hot: false,
        notes: 'RedisLeaseStore.tryAcquire + release without LeaseClient: the scripts alone',
        make: () => {
          const store = leaseholdStore();
          const o = { timeoutMs: 5000, signal: new AbortController().signal };
          return async (key) => {
            const leaseId = randomUUID();
            const r = await store.tryAcquire(
              { key, leaseId, ownerId: 'bench', ttlMs: TTL_MS, value: undefined },
              o,
            );
            if (r.status !== 'acquired') throw new Error('store: busy');
            await store.release({ key, leaseId, token: r.token }, o);
          };
        },
      },
      {
        name: 'redis-semaphore Mutex',
        hot: true,
        notes: 'default options (polls every 10 ms while busy)',
        make: () => {
          const redis = conn();
          return async (key) => {
            const m = new Mutex(redis, `${run}rs:${key}`, {
              lockTimeout: TTL_MS,
              acquireTimeout: 30_000,
            });
            await m.acquire();
            await m.release();
          };
        },
      },
      {
        name: 'redlock 4 (1 instance)',
        hot: true,
        notes: 'retryCount −1 (unbounded), default retryDelay 200 ms ± 100 ms jitter',
        make: () => {
          const redlock = new Redlock([conn() as unknown as Redlock.CompatibleRedisClient], {
            retryCount: -1,
          });
          return async (key) => {
            const lock = await redlock.lock(`${run}rl:${key}`, TTL_MS);
            await lock.unlock();
          };
        },
      },
      floorSubject(
        'floor: two empty scripts',
        "EVALSHA of a `return 1` script to acquire and another to release, same arguments as leasehold's: what any lock of one acquire script and one release script pays with nothing in them",
        [EMPTY_SCRIPT, EMPTY_SCRIPT],
        `${run}fe:`,
        conn,
      ),
      floorSubject(
        "floor: the scripts' Redis commands",
        'two scripts that run only the Redis commands of acquire.lua (HMGET, TIME, HSET) and release.lua (HMGET, HDEL, PUBLISH) with fixed values and no logic: the least these scripts can cost',
        [COMMANDS_ACQUIRE, COMMANDS_RELEASE],
        `${run}fc:`,
        conn,
      ),
      {
        name: RAW,
        hot: false,
        notes: 'no ownership check on DEL, no token: the limit',
        make: () => {
          const redis = conn();
          return async (key) => {
            const k = `${run}raw:${key}`;
            const ok = await redis.set(k, 'x', 'PX', TTL_MS, 'NX');
            if (ok !== 'OK') throw new Error('raw: busy');
            await redis.del(k);
          };
        },
      },
      {
        name: 'raw SET NX PX + DEL, auto-pipelined',
        hot: false,
        notes:
          'the raw pair on an ioredis client with enableAutoPipelining (commands of one tick in one write): the limit with batching, which leasehold does by corking its writes',
        make: () => {
          const redis = new Redis(URL, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
          connections.push(redis);
          return async (key) => {
            const k = `${run}rawap:${key}`;
            const ok = await redis.set(k, 'x', 'PX', TTL_MS, 'NX');
            if (ok !== 'OK') throw new Error('raw: busy');
            await redis.del(k);
          };
        },
      },
    ];

    // Rounds interleave the subjects so that a burst of load from other processes on a
    // shared machine does not land on one subject only; each row is the median round. The
    // one-worker rows swing most (each cycle is two wake-ups of two processes): they run in
    // many short rounds, and their ratio to the raw pair is the median of per-round ratios.
    const cases: Array<{ subject: Subject; workers: number; keys: 'distinct' | 'hot' }> = [];
    for (const keys of ['distinct', 'hot'] as const) {
      for (const workers of [1, 32]) {
        for (const subject of subjects) {
          if (keys === 'hot' && (!subject.hot || workers === 1)) continue;
          if (keys === 'distinct' && subject.onlyHot === true) continue;
          cases.push({ subject, workers, keys });
        }
      }
    }
    const cycles = cases.map((c) => ({
      ...c,
      cycle: c.subject.make(c.keys === 'hot'),
      runs: [] as Measured[],
    }));
    const single = cycles.filter((c) => c.workers === 1);
    const others = cycles.filter((c) => c.workers !== 1);
    const phases = [
      { group: single, rounds: opts.quick ? 3 : 15, ms: durationMs / (opts.quick ? 2 : 5) },
      { group: others, rounds: opts.quick ? 1 : 3, ms: durationMs },
    ];
    for (const phase of phases) {
      for (let round = 0; round < phase.rounds; round++) {
        // Alternate the order, so that no subject always follows the same one.
        const order = round % 2 === 0 ? phase.group : [...phase.group].reverse();
        for (const c of order) {
          const i = cycles.indexOf(c);
          c.runs.push(
            await measure(c.cycle, c.workers, c.keys === 'hot', `${run}${i}-${round}:`, phase.ms),
          );
        }
      }
    }
    for (const c of cycles) {
      const median = [...c.runs].sort((a, b) => a.cyclesPerSec - b.cyclesPerSec)[
        Math.floor(c.runs.length / 2)
      ]!;
      const range = c.runs.map((r) => r.cyclesPerSec).join('/');
      const raw = cycles.find(
        (b) => b.subject.name === RAW && b.workers === c.workers && b.keys === c.keys,
      );
      const perRound =
        c.workers === 1 && raw !== undefined && raw !== c
          ? {
              ratioToRaw: medianOf(
                c.runs.map((r, i) => r.cyclesPerSec / raw.runs[i]!.cyclesPerSec),
              ),
              cpuRatioToRaw: medianOf(
                c.runs.map((r, i) => r.cpuMsPer1000 / raw.runs[i]!.cpuMsPer1000),
              ),
            }
          : {};
      results.push({
        suite: 'redis',
        subject: c.subject.name,
        scenario: 'cycle',
        workers: c.workers,
        keys: c.keys,
        ...median,
        ...perRound,
        notes: `${c.subject.notes ?? ''}; median of ${c.runs.length} interleaved runs (cycles/s ${range})`,
      });
    }

    results.push(
      await handoff('leasehold', opts, run, async (key) => {
        const client = new LeaseClient({ store: leaseholdStore(), ownerId: 'holder' });
        const waiterClient = new LeaseClient({ store: leaseholdStore(), ownerId: 'waiter' });
        clients.push(client, waiterClient);
        const held = await client.acquire(key, { ttl: TTL_MS });
        if (held.status !== 'acquired') throw new Error('handoff: holder busy');
        return {
          wait: async () => {
            const r = await waiterClient.acquire(key, { ttl: TTL_MS, wait: 30_000 });
            if (r.status !== 'acquired') throw new Error('handoff: waiter failed');
            return () => r.lease.release().then(() => undefined);
          },
          release: () => held.lease.release().then(() => undefined),
        };
      }),
    );
    results.push(
      await handoff('redis-semaphore Mutex', opts, run, async (key) => {
        const holder = new Mutex(conn(), `${run}rs:${key}`, { lockTimeout: TTL_MS });
        const waiter = new Mutex(conn(), `${run}rs:${key}`, {
          lockTimeout: TTL_MS,
          acquireTimeout: 30_000,
        });
        await holder.acquire();
        return {
          wait: async () => {
            await waiter.acquire();
            return () => waiter.release();
          },
          release: () => holder.release(),
        };
      }),
    );
    results.push(
      await handoff('redlock 4 (1 instance)', opts, run, async (key) => {
        const redlock = new Redlock([conn() as unknown as Redlock.CompatibleRedisClient], {
          retryCount: -1,
        });
        const held = await redlock.lock(`${run}rl:${key}`, TTL_MS);
        return {
          wait: async () => {
            const lock = await redlock.lock(`${run}rl:${key}`, TTL_MS);
            return () => lock.unlock().then(() => undefined);
          },
          release: () => held.unlock().then(() => undefined),
        };
      }),
    );
    results.push(await idleRoundTrip(opts, conn()));
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    for (const s of stores) await s.close().catch(() => undefined);
    const admin = new Redis(URL, { maxRetriesPerRequest: 1 });
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${run}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await admin.unlink(...keys);
    } while (cursor !== '0');
    admin.disconnect();
    for (const c of connections) c.disconnect();
  }
  return results;
}

/**
 * The floor under every handoff row: one `PING` round trip after the same 30 ms idle wait. A
 * handoff needs at least that (the holder's release reaching Redis and the news reaching the
 * waiter), and on a VM an idle process takes far longer to wake than a busy one.
 */
async function idleRoundTrip(opts: BenchOptions, redis: Redis): Promise<BenchResult> {
  const rounds = opts.quick ? 20 : 100;
  const samples: number[] = [];
  await redis.ping();
  for (let i = 0; i < rounds; i++) {
    await sleep(30);
    const t = performance.now();
    await redis.ping();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return {
    suite: 'redis',
    subject: 'floor: one PING after the idle wait',
    scenario: 'handoff',
    workers: 1,
    keys: 'n/a',
    p50Ms: round(percentile(samples, 50), 3),
    p99Ms: round(percentile(samples, 99), 3),
    notes: `${samples.length} PINGs, each after 30 ms idle (as the handoff rows wait before the release)`,
  };
}

interface HandoffRound {
  /** Starts the waiter's acquire; resolves with its release once it holds the key. */
  readonly wait: () => Promise<() => Promise<void>>;
  /** The holder's release. */
  readonly release: () => Promise<void>;
}

/**
 * Handoff latency: the holder holds, a waiter is parked (given 30 ms to reach its wait), then
 * the holder's release is timed until the waiter's acquire resolves.
 */
async function handoff(
  subject: string,
  opts: BenchOptions,
  run: string,
  setup: (key: string) => Promise<HandoffRound>,
): Promise<BenchResult> {
  const rounds = opts.quick ? 20 : 100;
  const samples: number[] = [];
  const deadline = performance.now() + Math.max(opts.durationMs * 5, 10_000);
  for (let i = 0; i < rounds && performance.now() < deadline; i++) {
    const round = await setup(`${run}handoff-${subject.length}-${i}`);
    let resolvedAt = 0;
    const waiting = round.wait().then((rel) => {
      resolvedAt = performance.now();
      return rel;
    });
    await sleep(30);
    const releasedAt = performance.now();
    await round.release();
    const releaseWaiter = await waiting;
    samples.push(resolvedAt - releasedAt);
    await releaseWaiter();
  }
  samples.sort((a, b) => a - b);
  return {
    suite: 'redis',
    subject,
    scenario: 'handoff',
    workers: 2,
    keys: 'hot',
    p50Ms: round(percentile(samples, 50), 3),
    p99Ms: round(percentile(samples, 99), 3),
    notes: `${samples.length} handoffs, release() start → waiter's acquire resolved`,
  };
}
