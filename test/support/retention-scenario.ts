import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LeaseStore, StoreRequestOptions } from '../../src/core/store.js';

/** How many released keys the retention tests create: 10,000, or 10^6 with LEASEHOLD_CHAOS=1. */
export const RETENTION_KEYS = process.env['LEASEHOLD_CHAOS'] === '1' ? 1_000_000 : 10_000;

const opts = (): StoreRequestOptions => ({
  timeoutMs: 10_000,
  signal: new AbortController().signal,
});

/** What a store's retention test gives the shared scenario. */
export interface RetentionSubject {
  readonly store: LeaseStore;
  /** Writes released records for `keys`, key i with last token `tokenOf(i)`, as the store would. */
  seedReleased(keys: readonly string[], tokenOf: (i: number) => bigint): Promise<void>;
  /** Runs the retention pass (or the planted bug: a pass that does not raise the floor). */
  prune(): Promise<{ deleted: number; floor: bigint }>;
  /** Key records the store holds now. */
  records(): Promise<number>;
}

/** What the scenario saw; `violations` lists grants at or below a token issued before. */
export interface RetentionOutcome {
  readonly highestBefore: bigint;
  readonly deleted: number;
  readonly recordsAfter: number;
  readonly liveRows: number;
  readonly violations: string[];
}

/**
 * Must-show 5: N released keys plus a few held ones; record the highest token; prune; then
 * grant a sample of the deleted keys and brand-new keys. Every new token must be above the
 * highest before (else a violation is listed), held leases keep renewing with their tokens.
 */
export async function runRetentionScenario(
  subject: RetentionSubject,
  prefix: string,
  n = RETENTION_KEYS,
  base = 1_000_000_000n,
  /**
   * 'all': every new token above the highest token before (all seeded keys deleted); 'own':
   * a seeded key's new token above its own last one (some records were rightly kept).
   */
  above: 'all' | 'own' = 'all',
): Promise<RetentionOutcome> {
  const { store } = subject;
  // Held keys, granted and renewed through the store.
  const held = [];
  for (let i = 0; i < 20; i++) {
    const req = {
      key: `${prefix}held/${i}`,
      leaseId: randomUUID(),
      ownerId: 'h',
      ttlMs: 60_000,
      value: undefined,
    };
    const r = await store.tryAcquire(req, opts());
    assert.equal(r.status, 'acquired');
    held.push({
      key: req.key,
      leaseId: req.leaseId,
      token: r.status === 'acquired' ? r.token : 0n,
    });
  }
  // Released keys granted and released through the store (a few), the rest seeded in bulk
  // with high tokens, so that the highest token before is a seeded one.
  for (let i = 0; i < 50; i++) {
    const req = {
      key: `${prefix}gone/store/${i}`,
      leaseId: randomUUID(),
      ownerId: 'g',
      ttlMs: 60_000,
      value: undefined,
    };
    const r = await store.tryAcquire(req, opts());
    assert.equal(r.status, 'acquired');
    if (r.status === 'acquired') {
      const rel = await store.release(
        { key: req.key, leaseId: req.leaseId, token: r.token },
        opts(),
      );
      assert.equal(rel.status, 'released');
    }
  }
  const seeded = Array.from({ length: n }, (_, i) => `${prefix}gone/${i}`);
  const tokenOf = (i: number): bigint => base + BigInt((i * 7919) % n);
  await subject.seedReleased(seeded, tokenOf);
  const highestBefore = base + BigInt(n - 1);

  const pruned = await subject.prune();
  const violations: string[] = [];
  // Held leases untouched: they renew, and inspect shows their tokens.
  for (const h of held) {
    const r = await store.renew({ ...h, ttlMs: 60_000 }, opts());
    if (r.status !== 'renewed') violations.push(`held ${h.key} lost`);
    const s = await store.inspect(h.key, opts());
    if (s.lastToken !== h.token)
      violations.push(`held ${h.key} token ${s.lastToken} != ${h.token}`);
  }
  const recordsAfter = await subject.records();
  const sample: [string, bigint][] = [
    ...Array.from({ length: 100 }, (_, j): [string, bigint] => {
      const i = Math.floor((j * n) / 100);
      return [seeded[i]!, above === 'all' ? highestBefore : tokenOf(i)];
    }),
    ...Array.from({ length: 100 }, (_, i): [string, bigint] => [
      `${prefix}new/${i}`,
      above === 'all' ? highestBefore : 0n,
    ]),
  ];
  for (const [key, floor] of sample) {
    const r = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'n', ttlMs: 60_000, value: undefined },
      opts(),
    );
    if (r.status !== 'acquired') violations.push(`${key}: ${r.status}`);
    else if (r.token <= floor) violations.push(`${key}: token ${r.token} <= ${floor}`);
  }
  return {
    highestBefore,
    deleted: pruned.deleted,
    recordsAfter,
    liveRows: held.length,
    violations,
  };
}
