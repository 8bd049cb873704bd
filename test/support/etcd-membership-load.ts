import type { Redis } from 'ioredis';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import { RedisFence } from '../../src/fencing/redis.js';
import { sharedNow } from '../../src/fault/protocol.js';
import { EtcdLeaseStore } from '../../src/stores/etcd/store.js';
import { FenceHistory, type ResourceLogEntry } from './fence-history.js';

/** One write as the resource logged it; `resource` is the lease key it belongs to. */
export type KeyedLogEntry = ResourceLogEntry & { readonly resource: string };
import { elapse } from './time.js';

/** One grant as its holder saw it, on the `performance.now()` scale. */
export interface HolderGrant {
  readonly key: string;
  readonly token: bigint;
  readonly worker: number;
  readonly invokedAt: number;
  readonly grantedAt: number;
  /** The end of the holder's right to act: its release began, or its local deadline passed. */
  validUntil: number;
}

/** A stretch of failed store calls of one worker, ended by its next answered call. */
export interface OutageWindow {
  readonly worker: number;
  readonly from: number;
  readonly ms: number;
}

/** Options of {@link runMembershipLoad}. */
export interface MembershipLoadOptions {
  readonly hosts: readonly string[];
  readonly workers: number;
  /** Keys every worker contends for (in addition to one key of its own). */
  readonly sharedKeys: readonly string[];
  readonly keyPrefix: string;
  readonly ttlMs: number;
  /** The fenced resource: a Redis outside etcd, its data and marks under `dataPrefix`. */
  readonly resource: Redis;
  readonly dataPrefix: string;
  /** The membership transitions; the load runs until this resolves. */
  readonly transitions: (h: FenceHistory) => Promise<void>;
}

/** What a membership load saw. */
export interface MembershipLoad {
  readonly history: FenceHistory;
  readonly log: KeyedLogEntry[];
  readonly grants: HolderGrant[];
  readonly outages: OutageWindow[];
  /** `unavailable` answers that said the store noticed a restore (decision 011). */
  readonly restoreRefusals: string[];
  readonly unavailable: number;
  readonly staleAttempted: number;
  readonly staleRejected: number;
  readonly staleAccepted: number;
  /** The leases held (renewed by their client) through the whole run, one per worker. */
  readonly held: readonly Lease[];
  /** When each held lease that was lost was lost (`performance.now()`), with its worker. */
  readonly heldLost: Array<{ worker: number; at: number }>;
  /** The token of `key`'s holder at etcd now (asked through worker 0's client). */
  holderToken(key: string): Promise<bigint | undefined>;
  /** Closes the clients and stores (after the caller inspected the held leases). */
  close(): Promise<void>;
}

const RESTORE_MESSAGE = /restored from a snapshot or replaced/;

/**
 * A fenced lock load on an etcd cluster while `transitions` changes its membership. Each
 * worker has its own EtcdLeaseStore over every host (its own connections), holds one lease
 * on a key of its own for the whole run (renewed by its client), and loops: acquire either
 * its own work key or a shared one, write through a {@link RedisFence} (the token's data and
 * the op id, appended to the resource's log in the same script: the log is in commit order),
 * hold briefly, write again, release, and sometimes write once more late with the old token —
 * a stale write whenever a newer grant of the key had a write acknowledged.
 */
export async function runMembershipLoad(o: MembershipLoadOptions): Promise<MembershipLoad> {
  const h = new FenceHistory('etcd-membership');
  const stores = Array.from(
    { length: o.workers },
    () => new EtcdLeaseStore({ hosts: [...o.hosts], minTtlMs: 1000 }),
  );
  const clients = stores.map(
    (store, i) => new LeaseClient({ store, ownerId: `w${i}`, requestTimeout: '2s' }),
  );
  const fences = Array.from(
    { length: o.workers },
    () => new RedisFence({ redis: o.resource, prefix: o.dataPrefix }),
  );
  const grants: HolderGrant[] = [];
  const outages: OutageWindow[] = [];
  const restoreRefusals: string[] = [];
  const acked = new Map<string, bigint>();
  const heldLost: Array<{ worker: number; at: number }> = [];
  const counts = { unavailable: 0, staleAttempted: 0, staleRejected: 0, staleAccepted: 0 };
  const rejected: KeyedLogEntry[] = [];
  const logKey = `${o.dataPrefix}log`;
  let lease = 0;

  const closeAll = async (): Promise<void> => {
    await Promise.all(held.map((l) => l.release().catch(() => undefined)));
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(stores.map((s) => s.close()));
  };
  const held: Lease[] = [];
  try {
    for (let i = 0; i < o.workers; i++) {
      // A call that went to a listed member not started yet answers unavailable: try again.
      let r = await clients[i]!.acquire(`${o.keyPrefix}/held-${i}`, { ttl: o.ttlMs });
      for (let n = 0; r.status === 'unavailable' && n < 20; n++) {
        await elapse(100);
        r = await clients[i]!.acquire(`${o.keyPrefix}/held-${i}`, { ttl: o.ttlMs });
      }
      if (r.status !== 'acquired') throw new Error(`held lease ${i}: ${r.status}`);
      held.push(r.lease);
      r.lease.signal.addEventListener('abort', () => {
        if (r.lease.lossReason === 'lost') heldLost.push({ worker: i, at: performance.now() });
      });
    }

    const write = async (i: number, key: string, token: bigint): Promise<void> => {
      const stale = token < (acked.get(key) ?? 0n);
      if (stale) counts.staleAttempted++;
      const op = h.invoke(`w${i}`, key, token, true);
      let status: string;
      let hwm: bigint | undefined;
      try {
        const r = await fences[i]!.commands(key, token, [
          { command: 'RPUSH', keys: [logKey], args: [`${op} ${key} ${token}`] },
          { command: 'SET', keys: [`${o.dataPrefix}{${key}}:data`], args: [token.toString()] },
        ]);
        status = r.status;
        if (r.status === 'stale_fence') hwm = r.highWaterMark;
      } catch {
        h.answer(`w${i}`, op, key, token, 'unknown');
        return;
      }
      if (status === 'applied') {
        h.answer(`w${i}`, op, key, token, 'ok');
        if (stale) counts.staleAccepted++;
        if (token > (acked.get(key) ?? 0n)) acked.set(key, token);
      } else {
        h.answer(`w${i}`, op, key, token, 'stale');
        if (stale) counts.staleRejected++;
        rejected.push({
          resource: key,
          op,
          token: String(token),
          action: 'rejected',
          ...(hwm === undefined ? {} : { hwm: String(hwm) }),
        });
      }
    };

    let stop = false;
    const worker = async (i: number): Promise<void> => {
      const c = clients[i]!;
      let failingSince: number | undefined;
      while (!stop) {
        const key =
          Math.random() < 0.5
            ? `${o.keyPrefix}/own-${i}`
            : o.sharedKeys[Math.floor(Math.random() * o.sharedKeys.length)]!;
        const op = h.recorder.newOp(`w${i}-a`);
        const invokedAt = performance.now();
        h.recorder.record({
          type: 'acquire',
          phase: 'invoke',
          t: sharedNow(),
          proc: `w${i}`,
          op,
          key,
          ttlMs: o.ttlMs,
        });
        const r = await c.acquire(key, { ttl: o.ttlMs, wait: 1000 });
        if (r.status === 'unavailable') {
          counts.unavailable++;
          failingSince ??= invokedAt;
          const why = String((r.cause as { message?: unknown } | undefined)?.message ?? r.cause);
          if (RESTORE_MESSAGE.test(why)) restoreRefusals.push(why);
          h.recorder.record({
            type: 'acquire',
            phase: 'unavailable',
            t: sharedNow(),
            proc: `w${i}`,
            op,
            key,
          });
          await elapse(20);
          continue;
        }
        if (failingSince !== undefined) {
          outages.push({ worker: i, from: failingSince, ms: performance.now() - failingSince });
          failingSince = undefined;
        }
        if (r.status !== 'acquired') {
          h.recorder.record({
            type: 'acquire',
            phase: 'busy',
            t: sharedNow(),
            proc: `w${i}`,
            op,
            key,
          });
          continue;
        }
        const l = r.lease;
        const label = `L${++lease}`;
        const now = sharedNow();
        h.recorder.record({
          type: 'acquire',
          phase: 'ok',
          t: now,
          proc: `w${i}`,
          op,
          key,
          token: String(l.token),
          lease: label,
          ttlMs: o.ttlMs,
          deadline: performance.timeOrigin + l.deadline,
          // etcd states no expiry instant: the client's observation (docs/history-format.md).
          storeExpiresAt: now + o.ttlMs,
          storeExpiryObservedBy: 'client',
        });
        const g: HolderGrant = {
          key,
          token: l.token,
          worker: i,
          invokedAt,
          grantedAt: performance.now(),
          validUntil: Number.POSITIVE_INFINITY,
        };
        grants.push(g);
        await write(i, key, l.token);
        await elapse(5 + Math.random() * 25);
        if (l.isValid()) await write(i, key, l.token);
        g.validUntil = Math.min(performance.now(), l.deadline);
        const rop = h.recorder.newOp(`w${i}-r`);
        const base = {
          type: 'release',
          proc: `w${i}`,
          op: rop,
          key,
          token: String(l.token),
          lease: label,
        } as const;
        h.recorder.record({ ...base, phase: 'invoke', t: sharedNow() });
        const rel = await l.release().catch(() => undefined);
        if (rel?.status === 'released' || rel?.status === 'not_owner')
          h.recorder.record({ ...base, phase: rel.status, t: sharedNow() });
        if (Math.random() < 0.3) {
          await elapse(5 + Math.random() * 30);
          await write(i, key, l.token);
        }
      }
      if (failingSince !== undefined)
        outages.push({ worker: i, from: failingSince, ms: performance.now() - failingSince });
    };

    const running = Array.from({ length: o.workers }, (_, i) => worker(i));
    try {
      await o.transitions(h);
    } finally {
      stop = true;
      await Promise.all(running);
    }
  } catch (err) {
    await closeAll();
    throw err;
  }

  // The resource's own log of applied writes, in commit order, then the rejected ones (a
  // rejection changes nothing, so its place in the order does not matter to I1).
  const entries = await o.resource.lrange(logKey, 0, -1);
  const log: KeyedLogEntry[] = entries.map((e) => {
    const [op = '', resource = '', token = ''] = e.split(' ');
    return { resource, op, token, action: 'applied' };
  });
  log.push(...rejected);

  return {
    history: h,
    log,
    grants,
    outages,
    restoreRefusals,
    ...counts,
    held,
    heldLost,
    async holderToken(key) {
      return (await clients[0]!.inspect(key)).holder?.token;
    },
    close: closeAll,
  };
}
