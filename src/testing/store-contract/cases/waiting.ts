import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isLeaseholdError } from '../../../core/errors.js';
import { uniqueKey, eventually } from '../../kit/wait.js';
import {
  shortTtl,
  OPTS,
  client,
  leaseOf,
  busyOf,
  observed,
  withStores,
  closeAll,
} from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: waiting, watching and take-over. */
export const waitingCases: StoreContractCase[] = [
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
];
