import { LeaseClient } from '../../src/core/client.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { readSse } from '../../src/stores/http/notify.js';

/** A bounded load run against a live leasehold server. */
export interface HttpLoadOptions {
  readonly url: string;
  readonly clients: number;
  /** Keys the clients contend on (few keys = hot). */
  readonly keys: number;
  readonly durationMs: number;
  /** A key prefix no other run uses. */
  readonly prefix: string;
  readonly ttl?: string;
  readonly wait?: string;
}

interface Grant {
  readonly key: string;
  readonly token: bigint;
  /** Monotonic time the grant answer arrived. */
  readonly grantedAt: number;
  /** Monotonic time the release request was sent. */
  readonly releaseSentAt: number;
}

/** What a load run saw. `violations` must be empty. */
export interface HttpLoadReport {
  readonly grants: number;
  readonly busy: number;
  readonly unavailable: number;
  readonly notReleased: number;
  readonly eventsSeen: number;
  readonly grantsMissingFromEvents: number;
  readonly http5xx: number;
  readonly violations: string[];
  /** Acquire+release cycle latencies of granted attempts, in ms. */
  readonly cycleMs: number[];
  readonly elapsedMs: number;
}

/**
 * Runs `clients` lease clients over HTTP for `durationMs`: each acquires one of `keys` keys
 * (waiting), releases it at once, and repeats. Meanwhile an event-stream subscriber records
 * every grant. Then checks the history: per key, tokens strictly increase and no lease was
 * granted before the previous holder had sent its release (no overlap), every grant appeared
 * on the event stream, and the server answered no 5xx.
 */
export async function runHttpLoad(o: HttpLoadOptions): Promise<HttpLoadReport> {
  const seen = new Set<string>();
  const events = new AbortController();
  const res = await fetch(`${o.url}/v1/events?prefix=${encodeURIComponent(o.prefix)}`, {
    signal: events.signal,
  });
  if (res.status !== 200 || res.body === null)
    throw new Error(`event stream answered ${res.status}`);
  const frames = readSse(res.body);
  for (;;) {
    const f = await frames.next();
    if (f.done === true) throw new Error('event stream ended before ready');
    if (f.value.event === 'ready') break;
  }
  const reading = (async () => {
    try {
      for await (const f of frames) {
        if (f.event !== 'acquired') continue;
        const e = JSON.parse(f.data) as { key: string; token: string };
        seen.add(`${e.key}#${e.token}`);
      }
    } catch {
      // aborted at the end
    }
  })();

  const grants: Grant[] = [];
  const cycleMs: number[] = [];
  let busy = 0;
  let unavailable = 0;
  let notReleased = 0;
  const started = performance.now();
  const until = started + o.durationMs;
  const stores = await Promise.all(
    Array.from({ length: o.clients }, () => HttpLeaseStore.connect({ url: o.url })),
  );
  await Promise.all(
    stores.map(async (store, i) => {
      const client = new LeaseClient({ store, ownerId: `load-${i}` });
      try {
        while (performance.now() < until) {
          const key = `${o.prefix}${Math.floor(Math.random() * o.keys)}`;
          const t0 = performance.now();
          const r = await client.acquire(key, { ttl: o.ttl ?? '10s', wait: o.wait ?? '5s' });
          if (r.status === 'busy') {
            busy++;
            continue;
          }
          if (r.status === 'unavailable') {
            unavailable++;
            continue;
          }
          const grantedAt = performance.now();
          await new Promise((resolve) => setImmediate(resolve));
          const releaseSentAt = performance.now();
          const rel = await r.lease.release();
          if (rel.status !== 'released') notReleased++;
          cycleMs.push(performance.now() - t0);
          grants.push({ key, token: r.lease.token, grantedAt, releaseSentAt });
        }
      } finally {
        await client.close();
        await store.close();
      }
    }),
  );
  const elapsedMs = performance.now() - started;

  // Give the stream a bounded time to deliver the last events.
  const deadline = performance.now() + 10_000;
  const missing = (): number => grants.filter((g) => !seen.has(`${g.key}#${g.token}`)).length;
  while (missing() > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const grantsMissingFromEvents = missing();
  events.abort();
  await reading;

  const violations: string[] = [];
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) {
    let list = byKey.get(g.key);
    if (list === undefined) byKey.set(g.key, (list = []));
    list.push(g);
  }
  for (const [key, list] of byKey) {
    list.sort((a, b) => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0));
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const cur = list[i]!;
      if (cur.token === prev.token) violations.push(`${key}: token ${cur.token} granted twice`);
      // The store granted `cur` after it released `prev`, so `cur`'s answer arrived after
      // `prev`'s release was sent. The reverse means two holders at once.
      if (cur.grantedAt <= prev.releaseSentAt) {
        violations.push(
          `${key}: token ${cur.token} granted before token ${prev.token} was released`,
        );
      }
    }
  }
  const metrics = await (await fetch(`${o.url}/metrics`)).text();
  let http5xx = 0;
  for (const m of metrics.matchAll(/^leasehold_http_request_seconds_count\{([^}]*)\} (\d+)/gm)) {
    if (/status="5\d\d"/.test(m[1]!)) http5xx += Number(m[2]);
  }
  return {
    grants: grants.length,
    busy,
    unavailable,
    notReleased,
    eventsSeen: seen.size,
    grantsMissingFromEvents,
    http5xx,
    violations,
    cycleMs,
    elapsedMs,
  };
}
