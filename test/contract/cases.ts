import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { LeaseClient, type LeaseClientOptions } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/lease.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type { AcquireResult } from '../../src/core/results.js';
import {
  canHandOff,
  isBatchRenewingLeaseStore,
  type LeaseStore,
  type StoreAcquireRequest,
  isQueueingLeaseStore,
  type StoreQueuedOptions,
  type StoreRequestOptions,
} from '../../src/core/store.js';
import { uniqueKey } from '../support/keys.js';
import { elapse, eventually } from '../support/time.js';
import type { ContractCase, StoreHarness } from './harness.js';

/**
 * A short TTL for cases that wait for expiry: `ms`, or the store's minimum TTL when that is
 * longer (etcd TTLs are whole seconds). Cases scale their waits by the same factor.
 */
function shortTtl(store: LeaseStore, ms: number): number {
  return Math.max(ms, store.capabilities.minTtlMs);
}

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

/** Opens `n` stores over the harness, runs `fn`, and always closes them. */
async function withStores<T>(
  h: StoreHarness,
  n: number,
  fn: (stores: LeaseStore[]) => Promise<T>,
): Promise<T> {
  const stores: LeaseStore[] = [];
  try {
    for (let i = 0; i < n; i++) stores.push(await h.open());
    return await fn(stores);
  } finally {
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
  }
}

function client(
  store: LeaseStore,
  ownerId: string,
  extra: Partial<LeaseClientOptions> = {},
): LeaseClient {
  return new LeaseClient({ store, ownerId, ...extra });
}

function leaseOf(r: AcquireResult, what = 'acquire'): Lease {
  assert.equal(
    r.status,
    'acquired',
    `${what} should be acquired, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  return r.lease;
}

function busyOf(r: AcquireResult): Extract<AcquireResult, { status: 'busy' }> {
  assert.equal(
    r.status,
    'busy',
    `expected busy, got ${r.status}${r.status === 'unavailable' ? `: ${String(r.cause)}` : ''}`,
  );
  return r;
}

/** Every lease a case made must be ended and no renewal may be left running. */
async function closeAll(...clients: LeaseClient[]): Promise<void> {
  for (const c of clients) {
    assert.equal(
      c.heldLeases().length,
      0,
      `client ${c.ownerId} still holds leases at the end of the case`,
    );
    await c.close();
  }
}

/**
 * A transparent wrapper over a real store that counts the calls a client makes. Every call
 * runs on the store itself (a store may keep state, like a subscriber, on `this`).
 */
function countCalls(store: LeaseStore): {
  store: LeaseStore;
  calls: { tryAcquire: number; release: number; releaseAndAcquire: number };
} {
  const calls = { tryAcquire: 0, release: 0, releaseAndAcquire: 0 };
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...a: unknown[]) => unknown;
      if (typeof prop === 'string' && prop in calls) {
        return (...args: unknown[]): unknown => {
          calls[prop as keyof typeof calls]++;
          return fn.apply(target, args);
        };
      }
      return fn.bind(target);
    },
  });
  return { store: wrapped, calls };
}

/**
 * A transparent wrapper over a real store that lets a case see when a waiter is parked:
 * by the client's loop (subscribed, then told busy again), or in the store's own queue.
 */
function observed(store: LeaseStore): {
  store: LeaseStore;
  busyAnswers: () => number;
  watches: () => number;
  /** Times a waiter was parked in the store's own queue (`acquireQueued`'s `onParked`). */
  queuedParks: () => number;
} {
  let busy = 0;
  let watches = 0;
  let queued = 0;
  const wrapped: LeaseStore = Object.create(store) as LeaseStore;
  Object.assign(wrapped, {
    tryAcquire: async (req: StoreAcquireRequest, o: StoreRequestOptions) => {
      const r = await store.tryAcquire(req, o);
      if (r.status === 'busy') busy++;
      return r;
    },
    watch: async (key: string, fn: () => void) => {
      const u = await store.watch(key, fn);
      watches++;
      return u;
    },
  });
  if (isQueueingLeaseStore(store)) {
    Object.assign(wrapped, {
      acquireQueued: (req: StoreAcquireRequest, o: StoreQueuedOptions) =>
        store.acquireQueued(req, {
          ...o,
          onParked: () => {
            queued++;
            o.onParked?.();
          },
        }),
    });
  }
  return {
    store: wrapped,
    busyAnswers: () => busy,
    watches: () => watches,
    queuedParks: () => queued,
  };
}

export const contractCases: ContractCase[] = [
  {
    name: 'grants a free key a positive bigint token and a deadline measured from before the request',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('grant');
        const before = a.now();
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, autoRenew: false }));
        const after = a.now();
        assert.equal(typeof lease.token, 'bigint');
        assert.ok(lease.token >= 1n, `token ${lease.token} must be positive`);
        assert.match(lease.leaseId, /^[0-9a-f-]{36}$/);
        assert.equal(lease.key, key);
        // The deadline counts from a moment between the call and the answer, minus the drift
        // allowance (ceil(1% × ttl) + 2 ms): never from the answer's arrival plus the full ttl.
        // (test/unit/acquire.test.ts pins it to the send time exactly, in virtual time.)
        assert.ok(
          lease.deadline >= before + 5000 - 52,
          'deadline counts from no earlier than the call',
        );
        assert.ok(
          lease.deadline <= after + 5000 - 52,
          'deadline never exceeds the answer time + ttl − drift',
        );
        assert.equal(lease.signal.aborted, false);
        assert.equal((await lease.release()).status, 'released');
        assert.equal(lease.signal.aborted, true, 'release ends the lease locally');
        await closeAll(a);
      });
    },
  },
  {
    name: 'answers busy with the holder, its value and its remaining time, never the full lease id',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('busy');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, value: 'host-a:8080' }));
        const busy = busyOf(await b.acquire(key, { ttl: 5000 }));
        assert.equal(busy.holder.ownerId, 'owner-a');
        assert.equal(busy.holder.token, lease.token);
        assert.equal(busy.holder.value, 'host-a:8080');
        assert.equal(busy.holder.leaseIdPrefix, lease.leaseId.slice(0, 8));
        assert.ok(
          busy.holder.remainingMs > 0 && busy.holder.remainingMs <= 5000,
          `remaining ${busy.holder.remainingMs}`,
        );
        assert.ok(
          busy.retryAfterMs > 0 && busy.retryAfterMs <= 5000,
          `retryAfter ${busy.retryAfterMs}`,
        );
        const shown = JSON.stringify(busy.holder, (_k, v: unknown) =>
          typeof v === 'bigint' ? v.toString() : v,
        );
        assert.ok(!shown.includes(lease.leaseId), 'observers must not see the full lease id');
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'lets a new owner in only after the TTL has run out by the store clock',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('expiry');
        const ttl = shortTtl(s1!, 300);
        const sentA = performance.now();
        const leaseA = leaseOf(await a.acquire(key, { ttl, autoRenew: false }));
        busyOf(await b.acquire(key, { ttl: 5000 }));
        const leaseB = await eventually('B to acquire after expiry', async () => {
          const r = await b.acquire(key, { ttl: 5000 });
          return r.status === 'acquired' ? r.lease : undefined;
        });
        const grantedAfter = performance.now() - sentA;
        // B's grant was decided at the store after A's grant + ttl; A's grant came after A's
        // send, B's answer after B's grant: so the elapsed local time is at least the ttl.
        assert.ok(
          grantedAfter >= ttl - 2,
          `B got the key ${grantedAfter.toFixed(1)}ms after A asked for ${ttl}ms`,
        );
        assert.ok(leaseB.token > leaseA.token, `token ${leaseB.token} must exceed ${leaseA.token}`);
        assert.equal((await leaseA.renew()).status, 'lost');
        assert.equal((await leaseA.release()).status, 'not_owner');
        await leaseB.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'decides expiry by the store clock, not the client clock: a client whose clock jumps a day ahead still sees busy',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const clock = new ManualClock();
        const b = client(s2!, 'owner-b', { clock });
        const key = uniqueKey('clock');
        const lease = leaseOf(await a.acquire(key, { ttl: 10_000 }));
        await clock.advance(86_400_000);
        const busy = busyOf(await b.acquire(key, { ttl: 5000 }));
        assert.equal(busy.holder.token, lease.token);
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'renew extends the lease at the store',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('renew');
        // Remaining time is reported at the store's TTL granularity: wait long enough to see
        // the difference a renewal makes, with a TTL that leaves the renewal time to arrive
        // on a loaded machine (a 3 s TTL after a 2 s wait was lost before it got there).
        const waitMs = Math.max(500, 2 * s1!.capabilities.ttlGranularityMs);
        const ttl = Math.max(3000, 3 * waitMs);
        const lease = leaseOf(await a.acquire(key, { ttl, autoRenew: false }));
        await elapse(waitMs);
        const before = busyOf(await b.acquire(key, { ttl })).holder.remainingMs;
        const deadlineBefore = lease.deadline;
        const renewed = await lease.renew();
        assert.equal(renewed.status, 'renewed');
        assert.ok(lease.deadline > deadlineBefore, 'the local deadline moves forward');
        const after = busyOf(await b.acquire(key, { ttl })).holder.remainingMs;
        assert.ok(
          after > before,
          `remaining time after renew (${after}ms) must exceed before (${before}ms)`,
        );
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a renewal after expiry is lost and stays lost, even when nobody took the key',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('lost');
        const ttl = shortTtl(s!, 200);
        const lease = leaseOf(await a.acquire(key, { ttl, autoRenew: false }));
        await elapse(ttl * 2.25);
        const ref = { key, leaseId: lease.leaseId, token: lease.token, ttlMs: 5000 };
        assert.equal(
          (await s!.renew(ref, OPTS())).status,
          'lost',
          'the store must not revive an expired lease',
        );
        assert.equal((await s!.renew(ref, OPTS())).status, 'lost', 'lost is final');
        assert.equal((await lease.renew()).status, 'lost');
        assert.equal(lease.status, 'lost');
        assert.equal(lease.signal.aborted, true);
        const state = await s!.inspect(key, OPTS());
        assert.equal(state.holder, undefined, 'no live holder after expiry');
        const next = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.ok(next.token > lease.token, 'reacquisition makes a new, greater token');
        await next.release();
        await lease.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'release is conditional on lease id and token, and keeps the token counter',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('release');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.equal(
          (await s!.release({ key, leaseId: randomUUID(), token: lease.token }, OPTS())).status,
          'not_owner',
        );
        assert.equal(
          (await s!.release({ key, leaseId: lease.leaseId, token: lease.token + 1n }, OPTS()))
            .status,
          'not_owner',
        );
        assert.equal(
          (
            await s!.release(
              { key: `${key}/other`, leaseId: lease.leaseId, token: lease.token },
              OPTS(),
            )
          ).status,
          'not_owner',
        );
        assert.equal(
          (await s!.inspect(key, OPTS())).holder?.token,
          lease.token,
          'a wrong release leaves the holder',
        );
        assert.equal((await lease.release()).status, 'released');
        assert.equal(
          (await lease.release()).status,
          'released',
          'a second release returns the first answer',
        );
        const state = await s!.inspect(key, OPTS());
        assert.equal(state.holder, undefined);
        assert.equal(state.lastToken, lease.token, 'release keeps the token counter');
        const next = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.ok(next.token > lease.token, 'the grant after a release has a greater token');
        await next.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'a stale renew or release never touches the new holder',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('stale');
        const leaseA = leaseOf(await a.acquire(key, { ttl: shortTtl(s1!, 200), autoRenew: false }));
        const leaseB = await eventually('B to take over', async () => {
          const r = await b.acquire(key, { ttl: 5000 });
          return r.status === 'acquired' ? r.lease : undefined;
        });
        const refA = { key, leaseId: leaseA.leaseId, token: leaseA.token };
        assert.equal((await s1!.renew({ ...refA, ttlMs: 5000 }, OPTS())).status, 'lost');
        assert.equal((await s1!.release(refA, OPTS())).status, 'not_owner');
        assert.equal((await leaseA.release()).status, 'not_owner');
        const state = await s2!.inspect(key, OPTS());
        assert.equal(state.holder?.token, leaseB.token, 'B still holds the key');
        assert.equal(state.holder?.ownerId, 'owner-b');
        assert.equal((await leaseB.renew()).status, 'renewed');
        await leaseB.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a retried acquire with the same lease id is idempotent and returns the same token',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const key = uniqueKey('idem');
        const req = {
          key,
          leaseId: randomUUID(),
          ownerId: 'owner-a',
          ttlMs: 5000,
          value: undefined,
        };
        const first = await s!.tryAcquire(req, OPTS());
        const second = await s!.tryAcquire(req, OPTS());
        assert.equal(first.status, 'acquired');
        assert.equal(second.status, 'acquired');
        assert.equal((second as { token: bigint }).token, (first as { token: bigint }).token);
        assert.equal((await s!.inspect(key, OPTS())).lastToken, (first as { token: bigint }).token);
        assert.equal(
          (
            await s!.release(
              { key, leaseId: req.leaseId, token: (first as { token: bigint }).token },
              OPTS(),
            )
          ).status,
          'released',
        );
      });
    },
  },
  {
    name: 'a busy answer changes nothing: the holder keeps its token and its expiry',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b');
        const key = uniqueKey('busy-noop');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, autoRenew: false }));
        const first = busyOf(await b.acquire(key, { ttl: 60_000 })).holder.remainingMs;
        for (let i = 0; i < 20; i++) busyOf(await b.acquire(key, { ttl: 60_000 }));
        const state = await s1!.inspect(key, OPTS());
        assert.equal(state.lastToken, lease.token);
        assert.equal(state.holder?.token, lease.token);
        assert.ok(
          (state.holder?.remainingMs ?? 0) <= first,
          'busy attempts must not extend the holder',
        );
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'tokens strictly increase and holders never overlap across 50 concurrent contenders on one key',
    timeoutMs: 120_000,
    async run(h) {
      await withStores(h, 5, async (stores) => {
        const clients = Array.from({ length: 50 }, (_, i) =>
          client(stores[i % stores.length]!, `owner-${i}`),
        );
        const key = uniqueKey('contend');
        // Round 1: everyone at once, no waiting: exactly one wins.
        const burst = await Promise.all(clients.map((c) => c.acquire(key, { ttl: 10_000 })));
        const winners = burst.filter((r) => r.status === 'acquired');
        assert.equal(
          winners.length,
          1,
          `exactly one of 50 simultaneous acquires must win, got ${winners.length}`,
        );
        assert.equal(burst.filter((r) => r.status === 'busy').length, 49);
        const first = leaseOf(winners[0]!);
        await first.release();
        // Round 2: everyone waits its turn.
        const tokens: bigint[] = [first.token];
        let inside = 0;
        let maxInside = 0;
        await Promise.all(
          clients.map(async (c) => {
            const lease = leaseOf(
              await c.acquire(key, { ttl: 10_000, wait: 60_000 }),
              `${c.ownerId} waiting acquire`,
            );
            inside++;
            maxInside = Math.max(maxInside, inside);
            tokens.push(lease.token);
            await new Promise((r) => setImmediate(r));
            inside--;
            await lease.release();
          }),
        );
        assert.equal(maxInside, 1, 'two contenders held the key at once');
        assert.equal(tokens.length, 51);
        for (let i = 1; i < tokens.length; i++) {
          assert.ok(
            tokens[i]! > tokens[i - 1]!,
            `grant ${i} has token ${tokens[i]} after ${tokens[i - 1]}`,
          );
        }
        await closeAll(...clients);
      });
    },
  },
  {
    name: 'tokens keep increasing across a store re-open',
    async run(h) {
      const key = uniqueKey('reopen');
      const firstToken = await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const l1 = leaseOf(await a.acquire(key, { ttl: 5000 }));
        await l1.release();
        const l2 = leaseOf(await a.acquire(key, { ttl: 5000 }));
        await l2.release();
        await closeAll(a);
        return l2.token;
      });
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a2');
        assert.equal(
          (await s!.inspect(key, OPTS())).lastToken,
          firstToken,
          'the counter survives the re-open',
        );
        const l3 = leaseOf(await a.acquire(key, { ttl: 5000 }));
        assert.ok(
          l3.token > firstToken,
          `token after re-open ${l3.token} must exceed ${firstToken}`,
        );
        await l3.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'a waiter is woken by the release itself, not by polling',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const spy = observed(s2!);
        const b = client(spy.store, 'owner-b', { pollInterval: 60_000 });
        const key = uniqueKey('wake');
        const lease = leaseOf(await a.acquire(key, { ttl: 30_000 }));
        const waiting = b.acquire(key, { ttl: 5000, wait: 5000 });
        // Parked: subscribed, then re-checked once more and found busy (or queued at the store).
        await eventually('B to park', () =>
          spy.queuedParks() >= 1 || (spy.watches() === 1 && spy.busyAnswers() >= 2)
            ? true
            : undefined,
        );
        const releasedAt = performance.now();
        await lease.release();
        const leaseB = leaseOf(await waiting);
        const wokeAfter = performance.now() - releasedAt;
        // Neither the 60 s poll nor A's 30 s ttl could explain a wake-up this soon.
        assert.ok(wokeAfter < 3000, `B took ${wokeAfter.toFixed(0)}ms to notice the release`);
        assert.ok(leaseB.token > lease.token);
        await leaseB.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a watch tells of every grant and release of its key, made through another store instance, from the moment it resolves',
    async run(h) {
      await withStores(h, 2, async ([watching, granting]) => {
        const key = uniqueKey('watch-grant');
        const calls: Array<string | undefined> = [];
        let notify: (() => void) | undefined;
        const unwatch = await watching!.watch(key, (change) => {
          calls.push(change);
          notify?.();
        });
        const next = async (what: string, n: number): Promise<void> => {
          // Bounded, and far shorter than any poll: only the store's notification explains it.
          const until = performance.now() + 3000;
          while (calls.length < n) {
            const left = until - performance.now();
            assert.ok(
              left > 0,
              `no notification of the ${what} within 3 s (${calls.length} so far)`,
            );
            await new Promise<void>((resolve) => {
              notify = resolve;
              setTimeout(resolve, Math.min(left, 100));
            });
          }
        };
        const until = async (ok: () => boolean, what: string): Promise<void> => {
          const deadline = performance.now() + 3000;
          while (!ok()) {
            assert.ok(performance.now() < deadline, `${what} within 3 s: ${calls.join(', ')}`);
            await new Promise<void>((resolve) => {
              notify = resolve;
              setTimeout(resolve, 100);
            });
          }
        };
        try {
          for (let i = 0; i < 3; i++) {
            const leaseId = randomUUID();
            const beforeGrant = calls.length;
            const r = await granting!.tryAcquire(
              { key, leaseId, ownerId: 'granting', ttlMs: 30_000, value: undefined },
              OPTS(),
            );
            assert.equal(r.status, 'acquired');
            if (r.status !== 'acquired') return;
            await next(`grant ${i + 1}`, beforeGrant + 1);
            const before = calls.length;
            assert.equal(
              (await granting!.release({ key, leaseId, token: r.token }, OPTS())).status,
              'released',
            );
            await next(`release ${i + 1}`, before + 1);
            // A release is never told as a grant: one of its notifications has no value.
            await until(
              () => calls.slice(before).some((c) => c === undefined),
              `release ${i + 1} told without 'granted'`,
            );
          }
          // Whatever a store cannot tell apart it reports without a value; it never calls a
          // release a grant.
          assert.ok(
            calls.every((c) => c === undefined || c === 'granted'),
            `notifications: ${calls.join(', ')}`,
          );
        } finally {
          unwatch();
        }
      });
    },
  },
  {
    name: 'a waiter takes over when the holder expires without releasing',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const b = client(s2!, 'owner-b', { pollInterval: 60_000 });
        const key = uniqueKey('crash');
        const leaseA = leaseOf(await a.acquire(key, { ttl: shortTtl(s1!, 400), autoRenew: false }));
        const started = performance.now();
        const leaseB = leaseOf(await b.acquire(key, { ttl: 5000, wait: 20_000 }));
        const took = performance.now() - started;
        assert.ok(took < 5000, `takeover after the holder's expiry took ${took.toFixed(0)}ms`);
        assert.ok(leaseB.token > leaseA.token);
        await leaseB.release();
        await leaseA.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'a bounded wait ends busy, and an aborted wait throws ERR_ABORTED and leaves the holder alone',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const spy = observed(s2!);
        const b = client(spy.store, 'owner-b');
        const key = uniqueKey('abort');
        const lease = leaseOf(await a.acquire(key, { ttl: 30_000 }));
        const t0 = performance.now();
        const timedOut = busyOf(await b.acquire(key, { ttl: 5000, wait: 300 }));
        assert.ok(performance.now() - t0 >= 290, 'a bounded wait lasts its bound');
        assert.equal(timedOut.holder.token, lease.token);
        const controller = new AbortController();
        const before = spy.busyAnswers();
        const queuedBefore = spy.queuedParks();
        const waiting = b.acquire(key, { ttl: 5000, wait: 20_000, signal: controller.signal });
        await eventually('B to park', () =>
          spy.queuedParks() > queuedBefore || spy.busyAnswers() >= before + 2 ? true : undefined,
        );
        controller.abort(new Error('operator cancelled'));
        await assert.rejects(waiting, (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'));
        assert.equal((await s1!.inspect(key, OPTS())).holder?.token, lease.token);
        await lease.release();
        await closeAll(a, b);
      });
    },
  },
  {
    name: 'stores a value with the lease and returns it to observers',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const observer = client(s2!, 'observer');
        const prefix = uniqueKey('value');
        const lease = leaseOf(
          await a.acquire(`${prefix}/leader`, { ttl: 5000, value: '10.0.0.7:7000 ✓' }),
        );
        const other = leaseOf(await a.acquire(`${prefix}/other`, { ttl: 5000 }));
        const state = await observer.inspect(`${prefix}/leader`);
        assert.equal(state.holder?.value, '10.0.0.7:7000 ✓');
        assert.equal(state.holder?.ownerId, 'owner-a');
        assert.equal(state.lastToken, lease.token);
        const listed = await observer.list(`${prefix}/`);
        assert.deepEqual(
          listed.map((x) => x.key),
          [`${prefix}/leader`, `${prefix}/other`],
        );
        assert.equal(listed[0]!.holder?.value, '10.0.0.7:7000 ✓');
        assert.equal(listed[1]!.holder?.value, undefined);
        await lease.release();
        assert.deepEqual(
          (await observer.list(`${prefix}/`)).map((x) => x.key),
          [`${prefix}/other`],
        );
        assert.equal((await observer.inspect(`${prefix}/never`)).lastToken, 0n);
        await other.release();
        await closeAll(a, observer);
      });
    },
  },
  {
    name: 'rejects every invalid input with ERR_INVALID_ARGUMENT naming the field, and changes nothing stored',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('invalid');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, value: 'kept' }));
        const aborted = new AbortController();
        aborted.abort();
        const bad: Array<[string, unknown, Record<string, unknown>, string]> = [
          ['empty key', '', { ttl: 1000 }, 'key'],
          ['key with NUL', 'a\u0000b', { ttl: 1000 }, 'key'],
          ['key with CRLF', 'a\r\nb', { ttl: 1000 }, 'key'],
          ['key over 1 KiB', 'k'.repeat(1025), { ttl: 1000 }, 'key'],
          ['key of multibyte chars over 1 KiB', 'é'.repeat(513), { ttl: 1000 }, 'key'],
          ['key with a lone surrogate', 'a\ud800', { ttl: 1000 }, 'key'],
          ['non-string key', 42, { ttl: 1000 }, 'key'],
          ['missing ttl', key, {}, 'ttl'],
          ['ttl 0', key, { ttl: 0 }, 'ttl'],
          ['negative ttl', key, { ttl: -5 }, 'ttl'],
          ['ttl -0', key, { ttl: -0 }, 'ttl'],
          ['ttl NaN', key, { ttl: Number.NaN }, 'ttl'],
          ['ttl Infinity', key, { ttl: Number.POSITIVE_INFINITY }, 'ttl'],
          ['fractional ttl', key, { ttl: 1.5 }, 'ttl'],
          ['ttl above 24h', key, { ttl: 86_400_001 }, 'ttl'],
          ['ttl at the timer limit', key, { ttl: 2 ** 31 }, 'ttl'],
          ['ttl beyond MAX_SAFE_INTEGER', key, { ttl: Number.MAX_SAFE_INTEGER + 2 }, 'ttl'],
          ['ttl as a bare string', key, { ttl: '1000' }, 'ttl'],
          ['ttl as a bigint', key, { ttl: 1000n }, 'ttl'],
          ['ttl below 100ms', key, { ttl: 99 }, 'ttl'],
          ['renewEvery equal to ttl', key, { ttl: 1000, renewEvery: 1000 }, 'renewEvery'],
          ['renewEvery above ttl', key, { ttl: 1000, renewEvery: '2s' }, 'renewEvery'],
          ['negative wait', key, { ttl: 1000, wait: -1 }, 'wait'],
          ['infinite wait', key, { ttl: 1000, wait: Number.POSITIVE_INFINITY }, 'wait'],
          ['value over 1 KiB', key, { ttl: 1000, value: 'v'.repeat(1025) }, 'value'],
          ['non-string value', key, { ttl: 1000, value: { x: 1 } }, 'value'],
        ];
        for (const [what, k, opts, field] of bad) {
          await assert.rejects(
            a.acquire(k as string, opts as never),
            (err: unknown) => {
              if (!isLeaseholdError(err, 'ERR_INVALID_ARGUMENT')) {
                assert.fail(`${what}: expected ERR_INVALID_ARGUMENT, got ${String(err)}`);
              }
              assert.ok(
                err.message.startsWith(field),
                `${what}: message should name ${field}: ${err.message}`,
              );
              return true;
            },
            what,
          );
        }
        await assert.rejects(
          a.acquire(key, { ttl: 1000, signal: aborted.signal }),
          (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'),
        );
        const state = await s!.inspect(key, OPTS());
        assert.equal(state.lastToken, lease.token, 'no invalid call may advance the token');
        assert.equal(state.holder?.token, lease.token);
        assert.equal(state.holder?.value, 'kept');
        assert.equal((await lease.renew()).status, 'renewed');
        await lease.release();
        await closeAll(a);
      });
    },
  },
  {
    name: 'waiters of one client get the key in turn when its lease is released (hand-off where the store can)',
    async run(h) {
      await withStores(h, 1, async ([inner]) => {
        const counted = countCalls(inner!);
        const a = client(counted.store, 'owner-a');
        const key = uniqueKey('handoff');
        const first = leaseOf(await a.acquire(key, { ttl: 10_000 }));
        const order: string[] = [];
        const tokens: bigint[] = [first.token];
        let inside = 1;
        let maxInside = 1;
        const waiters = ['w1', 'w2', 'w3'].map(async (name) => {
          const lease = leaseOf(await a.acquire(key, { ttl: 10_000, wait: 60_000 }), name);
          inside++;
          maxInside = Math.max(maxInside, inside);
          order.push(name);
          tokens.push(lease.token);
          await new Promise((r) => setImmediate(r));
          inside--;
          assert.equal((await lease.release()).status, 'released');
        });
        // The three waiters joined the client's queue in call order, without asking the store
        // (this client holds the key): the counts at the end show it.
        assert.equal(a.heldLeases().length, 1);
        inside--;
        assert.equal((await first.release()).status, 'released');
        await Promise.all(waiters);
        assert.deepEqual(order, ['w1', 'w2', 'w3'], 'waiters of one client are served in order');
        assert.equal(maxInside, 1, 'two leases of the key were held at once');
        for (let i = 1; i < tokens.length; i++) {
          assert.ok(tokens[i]! > tokens[i - 1]!, `token ${tokens[i]} after ${tokens[i - 1]}`);
        }
        if (canHandOff(inner!)) {
          // Each release with a waiter behind it is one atomic release-and-acquire.
          assert.equal(counted.calls.releaseAndAcquire, 3);
          assert.equal(counted.calls.tryAcquire, 1, 'no waiter needed a re-check');
        } else {
          assert.equal(counted.calls.releaseAndAcquire, 0);
        }
        const state = await inner!.inspect(key, OPTS());
        assert.equal(state.holder, undefined);
        assert.equal(state.lastToken, tokens[tokens.length - 1]);
        await closeAll(a);
      });
    },
  },
  {
    name: 'release-and-acquire releases only its own lease and then obeys every acquire rule',
    async run(h, t) {
      await withStores(h, 1, async ([s]) => {
        if (!canHandOff(s!)) {
          assert.equal(
            typeof (s as { releaseAndAcquire?: unknown }).releaseAndAcquire,
            'undefined',
          );
          t.skip(`${h.name} has no atomic release-and-acquire (no hand-off capability)`);
          return;
        }
        const key = uniqueKey('rna');
        const req = (ownerId: string): StoreAcquireRequest => ({
          key,
          leaseId: randomUUID(),
          ownerId,
          ttlMs: 10_000,
          value: undefined,
        });
        const r1 = req('one');
        const g1 = await s.tryAcquire(r1, OPTS());
        assert.equal(g1.status, 'acquired');
        const t1 = g1.status === 'acquired' ? g1.token : 0n;
        // Hand from the holder to a new lease: released, granted with a greater token.
        const r2 = req('two');
        const h2 = await s.releaseAndAcquire({ key, leaseId: r1.leaseId, token: t1 }, r2, OPTS());
        assert.equal(h2.released, 'released');
        assert.equal(h2.acquired.status, 'acquired');
        const t2 = h2.acquired.status === 'acquired' ? h2.acquired.token : 0n;
        assert.ok(t2 > t1, `hand-off token ${t2} must exceed ${t1}`);
        assert.equal((await s.inspect(key, OPTS())).holder?.leaseIdPrefix, r2.leaseId.slice(0, 8));
        // A stale holder cannot hand the key on: not_owner, busy, and the holder untouched.
        const h3 = await s.releaseAndAcquire(
          { key, leaseId: r1.leaseId, token: t1 },
          req('three'),
          OPTS(),
        );
        assert.equal(h3.released, 'not_owner');
        assert.equal(h3.acquired.status, 'busy');
        if (h3.acquired.status === 'busy') assert.equal(h3.acquired.holder.token, t2);
        const held = await s.inspect(key, OPTS());
        assert.equal(held.holder?.token, t2);
        assert.equal(held.lastToken, t2, 'a refused hand-off writes nothing');
        // A failed release still leads to an ordinary attempt: a free key is granted.
        assert.equal(
          (await s.release({ key, leaseId: r2.leaseId, token: t2 }, OPTS())).status,
          'released',
        );
        const h4 = await s.releaseAndAcquire(
          { key, leaseId: r2.leaseId, token: t2 },
          req('four'),
          OPTS(),
        );
        assert.equal(h4.released, 'not_owner');
        assert.equal(h4.acquired.status, 'acquired');
        const t4 = h4.acquired.status === 'acquired' ? h4.acquired.token : 0n;
        assert.ok(t4 > t2);
        await s.release({ key, leaseId: '', token: t4 }, OPTS());
        const end = await s.inspect(key, OPTS());
        assert.equal(end.holder?.token, t4, 'a release with the wrong id changed nothing');
      });
    },
  },
  {
    name: 'renewMany answers each lease on its own: a lost, expired or foreign lease fails alone (stores that renew in batches)',
    async run(h, t) {
      await withStores(h, 2, async ([s, other]) => {
        if (!isBatchRenewingLeaseStore(s!)) {
          t.skip(`${h.name} renews one lease per call (no renewMany)`);
          return;
        }
        const ttlMs = shortTtl(s, 400);
        const grant = async (store: LeaseStore, key: string, ttl: number) => {
          const request: StoreAcquireRequest = {
            key,
            leaseId: randomUUID(),
            ownerId: 'batch',
            ttlMs: ttl,
            value: undefined,
          };
          const r = await store.tryAcquire(request, OPTS());
          assert.equal(r.status, 'acquired');
          return { key, leaseId: request.leaseId, token: (r as { token: bigint }).token };
        };
        assert.deepEqual(await s.renewMany([], OPTS()), [], 'an empty call answers []');
        const live = await grant(s, uniqueKey('batch-live'), 30_000);
        const live2 = await grant(other!, uniqueKey('batch-live'), 30_000);
        const expiring = await grant(s, uniqueKey('batch-expired'), ttlMs);
        const foreign = await grant(s, uniqueKey('batch-foreign'), 30_000);
        const released = await grant(s, uniqueKey('batch-released'), 30_000);
        assert.equal((await s.release(released, OPTS())).status, 'released');
        await eventually(
          'the short lease expired at the store',
          async () =>
            (await s.inspect(expiring.key, OPTS())).holder === undefined ? true : undefined,
          { timeoutMs: ttlMs * 20 },
        );
        const results = await s.renewMany(
          [
            { ...live, ttlMs: 30_000 },
            { ...expiring, ttlMs: 30_000 },
            { ...foreign, token: foreign.token + 1n, ttlMs: 30_000 },
            { ...live2, ttlMs: 30_000 },
            { ...released, ttlMs: 30_000 },
          ],
          OPTS(),
        );
        assert.deepEqual(
          results.map((r) => r.status),
          ['renewed', 'lost', 'lost', 'renewed', 'lost'],
        );
        // A lost renewal in the call changed nothing: the foreign key still has its holder.
        assert.equal((await other!.inspect(foreign.key, OPTS())).holder?.token, foreign.token);
        // The renewed ones were really extended, and stay renewable one by one.
        assert.equal((await s.renew({ ...live, ttlMs: 30_000 }, OPTS())).status, 'renewed');
        for (const l of [live, live2, foreign]) await s.release(l, OPTS());

        // Many leases in one call, one of them lost in the middle: the others are renewed, in
        // request order, and each really has the new expiry (granted for 5 s, renewed for 120 s).
        const many = [];
        for (let i = 0; i < 40; i++)
          many.push(await grant(i % 2 === 0 ? s : other!, uniqueKey(`batch-many-${i}`), 5_000));
        const gone = many[17]!;
        assert.equal((await s.release(gone, OPTS())).status, 'released');
        const answers = await s.renewMany(
          many.map((l) => ({ ...l, ttlMs: 120_000 })),
          OPTS(),
        );
        assert.deepEqual(
          answers.map((r) => r.status),
          many.map((_, i) => (i === 17 ? 'lost' : 'renewed')),
        );
        for (const [i, l] of many.entries()) {
          const holder = (await other!.inspect(l.key, OPTS())).holder;
          if (i === 17) {
            assert.equal(holder, undefined, 'the released lease stays released');
            continue;
          }
          assert.equal(holder?.token, l.token);
          assert.ok(
            holder.remainingMs > 60_000,
            `lease ${i} has the batch's new expiry (${holder.remainingMs} ms left)`,
          );
        }
        for (const l of many) await s.release(l, OPTS());
      });
    },
  },
  {
    name: 'a grant with a token block keeps the block from every later grant (stores with tokenBlocks)',
    async run(h, t) {
      await withStores(h, 2, async ([s, other]) => {
        if (s!.capabilities.tokenBlocks !== true) {
          t.skip(`${h.name} cannot reserve token blocks (capabilities.tokenBlocks is not true)`);
          return;
        }
        const key = uniqueKey('block');
        const req = (ownerId: string, tokenBlock?: number): StoreAcquireRequest => ({
          key,
          leaseId: randomUUID(),
          ownerId,
          ttlMs: 10_000,
          value: undefined,
          ...(tokenBlock === undefined ? {} : { tokenBlock }),
        });
        const tokenOf = (r: { status: string; token?: bigint }): bigint => {
          assert.equal(r.status, 'acquired');
          return r.token!;
        };
        const r1 = req('one', 8);
        const t1 = tokenOf(await s!.tryAcquire(r1, OPTS()));
        // The record keeps the grant's own token; observers see the top of the block.
        const held = await other!.inspect(key, OPTS());
        assert.equal(held.holder?.token, t1);
        assert.equal(held.lastToken, t1 + 7n, 'lastToken is the top of the block');
        // A retry of the same request answers the same token and reserves nothing more.
        assert.equal(tokenOf(await s!.tryAcquire(r1, OPTS())), t1);
        assert.equal((await other!.inspect(key, OPTS())).lastToken, t1 + 7n);
        // Renew and release compare the grant's own token, not the block's.
        const ref = { key, leaseId: r1.leaseId, token: t1 };
        assert.equal(
          (await s!.renew({ ...ref, token: t1 + 1n, ttlMs: 10_000 }, OPTS())).status,
          'lost',
        );
        assert.equal((await s!.renew({ ...ref, ttlMs: 10_000 }, OPTS())).status, 'renewed');
        assert.equal((await s!.release({ ...ref, token: t1 + 7n }, OPTS())).status, 'not_owner');
        assert.equal((await s!.release(ref, OPTS())).status, 'released');
        // The next grant, through another connection, is above the whole block.
        const r2 = req('two');
        const t2 = tokenOf(await other!.tryAcquire(r2, OPTS()));
        assert.ok(t2 > t1 + 7n, `token ${t2} must exceed the reserved ${t1 + 7n}`);
        assert.equal((await s!.inspect(key, OPTS())).lastToken, t2, 'a block of 1 is its token');
        const ref2 = { key, leaseId: r2.leaseId, token: t2 };
        if (canHandOff(s!)) {
          // A hand-off's grant reserves its block too, and the next grant is above it.
          const r3 = req('three', 4);
          const h3 = await s.releaseAndAcquire(ref2, r3, OPTS());
          assert.equal(h3.released, 'released');
          const t3 = tokenOf(h3.acquired);
          assert.ok(t3 > t2);
          assert.equal((await other!.inspect(key, OPTS())).lastToken, t3 + 3n);
          const h4 = await s.releaseAndAcquire(
            { key, leaseId: r3.leaseId, token: t3 },
            req('four'),
            OPTS(),
          );
          assert.equal(h4.released, 'released');
          const t4 = tokenOf(h4.acquired);
          assert.ok(t4 > t3 + 3n, `hand-off token ${t4} must exceed the reserved ${t3 + 3n}`);
          assert.equal((await s.inspect(key, OPTS())).lastToken, t4);
        } else {
          assert.equal((await s!.release(ref2, OPTS())).status, 'released');
        }
      });
    },
  },
  {
    name: 'answers unavailable, never busy, when the store cannot answer',
    async run(h) {
      const s = await h.open();
      const a = client(s, 'owner-a');
      await s.close();
      const r = await a.acquire(uniqueKey('down'), { ttl: 1000, wait: 200 });
      assert.equal(r.status, 'unavailable');
      await closeAll(a);
    },
  },
];
