import { LeaseClient } from '../../src/core/client.js';
import type { LeaseStore } from '../../src/core/store.js';
import type { RedisFence } from '../../src/fencing/redis.js';
import type { Cluster, Redis } from 'ioredis';
import { elapse } from './time.js';

/** One worker's view of the deployment: its own store and fence (its own connections). */
export interface LoadWorker {
  readonly store: LeaseStore;
  readonly fence: RedisFence;
}

/** Options of {@link runFailoverLoad}. */
export interface FailoverLoadOptions {
  readonly workers: number;
  /** The lease keys; the fenced data of a key lives under `<dataPrefix>{<key>}:…`. */
  readonly keys: readonly string[];
  readonly durationMs: number;
  /** When (ms after the start) `fault` runs. */
  readonly faultAtMs: number;
  /** Kills the master; resolves once it has exited. */
  readonly fault: () => Promise<void>;
  /** Keys whose takeover time is measured (those the fault took away). Defaults to all. */
  readonly affected?: (key: string) => boolean;
  readonly ttl: string;
  /** The longest critical sections last up to 1.3 × this. */
  readonly longHoldMs: number;
  readonly dataPrefix: string;
  readonly open: (worker: number) => LoadWorker;
  /** A client to read the fenced data with at the end. */
  readonly resource: Redis | Cluster;
}

/** What a failover load run measured. */
export interface FailoverFigures {
  grants: number;
  unavailable: number;
  fencedWrites: number;
  applied: number;
  /** Writes sent with a token below one whose write was already acknowledged for the key. */
  staleAttempted: number;
  staleRejected: number;
  staleAccepted: number;
  /** Overlaps of two holders' intervals (grant answer … release or loss), by the harness clock. */
  doubleHolderWindows: number;
  doubleHolderMaxMs: number;
  doubleHolderTotalMs: number;
  /**
   * Leases the store called lost while their holder still held them (a renewal found no
   * record): grants or renewals that the failover lost.
   */
  lostGrants: number;
  /**
   * From the fault's end (the master has exited) to the first grant of an affected key asked
   * for after it (a grant answered around the kill may come from the dying master).
   */
  takeoverMs: number | undefined;
  /** Grants of a key, in the order they were answered, whose token was not above the one before. */
  grantOrderViolations: number;
  /** Places where the resource's log of applied tokens went down (must be 0). */
  orderViolations: number;
  /** Acknowledged writes missing from the resource's log after the run (asynchronous replication). */
  lostAckedWrites: number;
}

interface Grant {
  readonly key: string;
  readonly token: bigint;
  readonly at: number;
  end: number | undefined;
}

/**
 * A bounded lock-set load through a failover: `workers` loops, each with its own store and
 * fence, acquire a random key (short TTL, short wait), make two fenced writes (each appends
 * its token to the key's log and sets its data, atomically with the token check) around a
 * critical section (mostly short, sometimes longer than a renewal period), release,
 * and sometimes write once more late with the old token — a stale write whenever a newer
 * grant of the key has had a write acknowledged. `fault` runs at `faultAtMs`; the run stops
 * by itself at `durationMs`.
 */
export async function runFailoverLoad(o: FailoverLoadOptions): Promise<FailoverFigures> {
  const f: FailoverFigures = {
    grants: 0,
    unavailable: 0,
    fencedWrites: 0,
    applied: 0,
    staleAttempted: 0,
    staleRejected: 0,
    staleAccepted: 0,
    doubleHolderWindows: 0,
    doubleHolderMaxMs: 0,
    doubleHolderTotalMs: 0,
    lostGrants: 0,
    takeoverMs: undefined,
    grantOrderViolations: 0,
    orderViolations: 0,
    lostAckedWrites: 0,
  };
  const grants: Grant[] = [];
  const acked = new Map<string, bigint>();
  const ackedWrites: { key: string; token: bigint }[] = [];
  const start = performance.now();
  const end = start + o.durationMs;
  let faultAt: number | undefined;
  const logKey = (key: string): string => `${o.dataPrefix}{${key}}:log`;

  const write = async (fence: RedisFence, key: string, token: bigint): Promise<void> => {
    const known = acked.get(key) ?? 0n;
    const stale = token < known;
    f.fencedWrites++;
    if (stale) f.staleAttempted++;
    let status: string;
    try {
      const r = await fence.commands(key, token, [
        { command: 'RPUSH', keys: [logKey(key)], args: [token.toString()] },
        { command: 'SET', keys: [`${o.dataPrefix}{${key}}:data`], args: [token.toString()] },
      ]);
      status = r.status;
    } catch {
      return; // unavailable during the failover: nothing was acknowledged
    }
    if (status === 'applied') {
      f.applied++;
      ackedWrites.push({ key, token });
      if (stale) f.staleAccepted++;
      if (token > (acked.get(key) ?? 0n)) acked.set(key, token);
    } else if (stale) {
      f.staleRejected++;
    }
  };

  const worker = async (i: number): Promise<void> => {
    const w = o.open(i);
    const client = new LeaseClient({ store: w.store, requestTimeout: '1s', ownerId: `w${i}` });
    try {
      while (performance.now() < end) {
        const key = o.keys[Math.floor(Math.random() * o.keys.length)]!;
        const askedAt = performance.now();
        const r = await client.acquire(key, { ttl: o.ttl, wait: '300ms' }).catch(() => undefined);
        if (r === undefined || r.status === 'unavailable') {
          f.unavailable++;
          await elapse(20); // back off while the deployment fails over
          continue;
        }
        if (r.status !== 'acquired') continue;
        const g: Grant = { key, token: r.lease.token, at: performance.now(), end: undefined };
        grants.push(g);
        f.grants++;
        if (
          faultAt !== undefined &&
          askedAt > faultAt &&
          f.takeoverMs === undefined &&
          (o.affected?.(key) ?? true)
        )
          f.takeoverMs = g.at - faultAt;
        const lease = r.lease;
        const lost = new Promise<void>((resolve) =>
          lease.signal.addEventListener('abort', () => {
            g.end ??= performance.now();
            if (lease.lossReason === 'lost') f.lostGrants++;
            resolve();
          }),
        );
        await write(w.fence, key, g.token);
        // Most critical sections are short; one in twenty outlives a renewal or two, so some
        // holders hold across the failover.
        const hold =
          Math.random() < 0.05 ? o.longHoldMs * (0.3 + Math.random()) : Math.random() * 30;
        await Promise.race([elapse(hold), lost]);
        if (!lease.signal.aborted) await write(w.fence, key, g.token);
        g.end ??= performance.now();
        await r.lease.release().catch(() => undefined);
        if (Math.random() < 0.3) {
          await elapse(5 + Math.random() * 40);
          await write(w.fence, key, g.token);
        }
      }
    } finally {
      await client.close();
      await w.store.close();
    }
  };

  const faultRun = (async () => {
    await elapse(o.faultAtMs);
    await o.fault();
    faultAt = performance.now();
  })();
  await Promise.all([...Array.from({ length: o.workers }, (_, i) => worker(i)), faultRun]);

  const byKey = new Map<string, Grant[]>();
  for (const g of grants) byKey.set(g.key, [...(byKey.get(g.key) ?? []), g]);
  for (const list of byKey.values()) {
    list.sort((a, b) => a.at - b.at);
    for (let i = 1; i < list.length; i++) {
      const next = list[i]!;
      if (next.token <= list[i - 1]!.token) f.grantOrderViolations++;
      for (let j = 0; j < i; j++) {
        const prev = list[j]!;
        const overlap = Math.min(prev.end ?? end, next.end ?? end) - next.at;
        if (overlap > 0) {
          f.doubleHolderWindows++;
          f.doubleHolderTotalMs += overlap;
          f.doubleHolderMaxMs = Math.max(f.doubleHolderMaxMs, overlap);
        }
      }
    }
  }
  const logged = new Map<string, bigint[]>();
  for (const key of o.keys) {
    const log = (await o.resource.lrange(logKey(key), 0, -1)).map((t) => BigInt(t));
    logged.set(key, log);
    for (let i = 1; i < log.length; i++) if (log[i]! < log[i - 1]!) f.orderViolations++;
  }
  const remaining = new Map<string, number>();
  for (const [key, log] of logged)
    for (const t of log) remaining.set(`${key} ${t}`, (remaining.get(`${key} ${t}`) ?? 0) + 1);
  for (const w of ackedWrites) {
    const id = `${w.key} ${w.token}`;
    const n = remaining.get(id) ?? 0;
    if (n > 0) remaining.set(id, n - 1);
    else f.lostAckedWrites++;
  }
  f.doubleHolderMaxMs = Math.round(f.doubleHolderMaxMs);
  f.doubleHolderTotalMs = Math.round(f.doubleHolderTotalMs);
  if (f.takeoverMs !== undefined) f.takeoverMs = Math.round(f.takeoverMs);
  return f;
}
