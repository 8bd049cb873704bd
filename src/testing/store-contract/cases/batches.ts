import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { uniqueKey, eventually } from '../../kit/wait.js';
import {
  canHandOff,
  isBatchRenewingLeaseStore,
  type LeaseStore,
  type StoreAcquireRequest,
} from '../../../core/store.js';
import { shortTtl, OPTS, withStores } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: batch renewal and token blocks. */
export const batchCases: StoreContractCase[] = [
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
];
