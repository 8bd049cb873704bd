// Many clients waiting on one key, and many event-stream watchers on one server: store reads
// per grant and hand-off latency as waiters grow; fan-out latency and server memory as
// watchers grow.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request, Agent } from 'node:http';
import { LeaseClient } from '../src/core/client.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
  WatchOptions,
} from '../src/core/store.js';
import { ForwardingLeaseStore } from '../src/testing/forwarding-store.js';
import { percentile, type BenchResult } from './lib.js';

/**
 * Counts the store calls that try to grant: `tryAcquire`, and the hand-off (`releaseAndAcquire`,
 * a release and the next waiter's grant in one call) where the store has it.
 */
class ReadCountingStore extends ForwardingLeaseStore {
  attempts = 0;
  /** Subscriptions to a key's changes that are live at the store. */
  watching = 0;
  override tryAcquire(r: StoreAcquireRequest, o: StoreRequestOptions): Promise<StoreAcquireResult> {
    this.attempts++;
    return super.tryAcquire(r, o);
  }
  protected override handOff(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    this.attempts++;
    return super.handOff(release, acquire, o);
  }
  override async watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch> {
    const unwatch = await super.watch(key, onChange, options);
    this.watching++;
    return unwatch;
  }
  override close(): Promise<void> {
    return Promise.resolve(); // the suite closes the inner store
  }
}

/**
 * `waiters` clients (spread over the given store objects, as processes sharing a few
 * connections would be) wait on one key; each takes it, releases it at once, and the next is
 * woken. Reports store grant attempts per grant and the hand-off latency (one release to the
 * next grant), over `grants` hand-offs.
 */
export async function waitersOnOneKey(
  subject: string,
  stores: readonly LeaseStore[],
  waiters: number,
  grants: number,
): Promise<{ row: BenchResult; attemptsPerGrant: number }> {
  const counting = stores.map((s) => new ReadCountingStore(s));
  const key = `bench/scale-wait/${randomBytes(3).toString('hex')}`;
  const clients = Array.from(
    { length: waiters },
    (_, i) =>
      new LeaseClient({
        store: counting[i % counting.length]!,
        ownerId: `w${i}`,
        requestTimeout: '60s',
      }),
  );
  const first = await clients[0]!.acquire(key, { ttl: 30_000 });
  if (first.status !== 'acquired') throw new Error(`waiters: first acquire ${first.status}`);
  const handOffs: number[] = [];
  let releasedAt = 0;
  let granted = 0;
  let a0 = 0;
  let attemptsAtDone: number | undefined;
  let done!: () => void;
  const allDone = new Promise<void>((r) => (done = r));
  const attempts0 = (): number => counting.reduce((n, s) => n + s.attempts, 0);
  // Every other client waits; each one that gets the key hands it on at once.
  const waiting = clients.slice(1).map(async (client) => {
    const r = await client.acquire(key, { ttl: 30_000, wait: 120_000 });
    if (r.status !== 'acquired') return;
    granted++;
    if (granted <= grants && releasedAt > 0) handOffs.push(performance.now() - releasedAt);
    if (granted === grants) {
      attemptsAtDone = attempts0() - a0;
      done();
    }
    releasedAt = performance.now();
    await r.lease.release();
  });
  // Every waiter first tries the key, subscribes to its changes, then tries once more (a
  // release between the two would otherwise go unseen): none of that is the cost of a grant.
  // So the first release waits until every waiter is subscribed and the attempts have
  // stopped; a fixed pause was too short on a loaded machine and counted them (2 per waiter,
  // 100 "per grant" at 10,000 waiters).
  await settle(() => counting.reduce((n, s) => n + s.watching, 0) >= waiters - 1, attempts0);
  a0 = attempts0();
  releasedAt = performance.now();
  await first.lease.release();
  await Promise.race([allDone, new Promise((r) => setTimeout(r, 120_000))]);
  const measured = Math.min(granted, grants);
  const attempts = attemptsAtDone ?? attempts0() - a0;
  await Promise.all(clients.map((c) => c.close()));
  await Promise.allSettled(waiting);
  const attemptsPerGrant = attempts / Math.max(1, measured);
  const row: BenchResult = {
    suite: 'scale',
    subject,
    scenario: `${waiters.toLocaleString('en-US')} waiters on one key`,
    workers: waiters,
    keys: 'hot',
    p50Ms: percentile(handOffs, 50),
    p99Ms: percentile(handOffs, 99),
    notes:
      `${attemptsPerGrant.toFixed(2)} store grant attempts per grant over ${measured} hand-offs, ` +
      `${((a0 - 1) / Math.max(1, waiters - 1)).toFixed(2)} per waiter to start waiting ` +
      `(${stores.length} store connections shared by the waiters); p50/p99: release to the next grant`,
  };
  return { row, attemptsPerGrant };
}

/** Waits until `ready()` and then until `count()` has not moved for 300 ms (at most 120 s). */
async function settle(ready: () => boolean, count: () => number): Promise<void> {
  const until = performance.now() + 120_000;
  let last = -1;
  let still = 0;
  while (performance.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    const now = count();
    still = ready() && now === last ? still + 50 : 0;
    last = now;
    if (still >= 300) return;
  }
  throw new Error('waiters: the waiters did not settle within 120 s');
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/**
 * `watchers` event streams (`GET /v1/events`) open on one server at `url` (process `pid`);
 * then `events` acquisitions through `store` (an HTTP store on the same server), each timed
 * from its send to its arrival on every stream. Reports the fan-out p50/p99 and the server's
 * RSS per stream.
 */
export async function watchersOnOneServer(
  url: string,
  pid: number,
  store: LeaseStore,
  watchers: number,
  events: number,
): Promise<BenchResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  const prefix = `bench/scale-sse/${randomBytes(3).toString('hex')}/`;
  const rss0 = rssOf(pid);
  const arrivals: Array<Map<string, number>> = [];
  const streams: Array<() => void> = [];
  await Promise.all(
    Array.from(
      { length: watchers },
      () =>
        new Promise<void>((resolve, reject) => {
          const seen = new Map<string, number>();
          arrivals.push(seen);
          const req = request(
            `${url}/v1/events?prefix=${encodeURIComponent(prefix)}`,
            { agent },
            (res) => {
              let buf = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => {
                buf += chunk;
                let end: number;
                while ((end = buf.indexOf('\n\n')) >= 0) {
                  const frame = buf.slice(0, end);
                  buf = buf.slice(end + 2);
                  if (frame.includes('event: ready')) resolve();
                  const key = /"key":"([^"]+)"/.exec(frame)?.[1];
                  if (key && frame.includes('event: acquired') && !seen.has(key))
                    seen.set(key, performance.now());
                }
              });
            },
          );
          req.on('error', reject);
          req.end();
          streams.push(() => req.destroy());
        }),
    ),
  );
  const rss1 = rssOf(pid);
  const client = new LeaseClient({ store, ownerId: 'sse-bench' });
  const fanOut: number[] = [];
  for (let e = 0; e < events; e++) {
    const key = `${prefix}${e}`;
    const sent = performance.now();
    const r = await client.acquire(key, { ttl: 30_000 });
    if (r.status !== 'acquired') throw new Error(`watchers: acquire ${r.status}`);
    const deadline = performance.now() + 30_000;
    while (arrivals.some((m) => !m.has(key)) && performance.now() < deadline)
      await new Promise((res) => setTimeout(res, 5));
    for (const m of arrivals) {
      const at = m.get(key);
      if (at !== undefined) fanOut.push(at - sent);
    }
    await r.lease.release();
  }
  const missed = events * watchers - fanOut.length;
  for (const close of streams) close();
  agent.destroy();
  await client.close();
  return {
    suite: 'scale',
    subject: 'http server event streams',
    scenario: `${watchers.toLocaleString('en-US')} watchers on one server`,
    workers: watchers,
    keys: 'n/a',
    p50Ms: percentile(fanOut, 50),
    p99Ms: percentile(fanOut, 99),
    notes:
      `server RSS ${((rss1 - rss0) / watchers / 1024).toFixed(1)} KiB per stream; ${missed} deliveries missed; ` +
      `p50/p99: acquire sent to the event's arrival on each stream, over ${events} events`,
  };
}
