import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { invalidArgument } from '../../src/core/errors.js';
import type { ClaimResult } from '../../src/core/results.js';
import { parseToken } from '../../src/core/validate.js';
import {
  fenceContractCases,
  runFenceContract,
  type FenceHarness,
  type FencePolicy,
  type FenceWriteOutcome,
} from '../../src/testing/fence-contract/index.js';

// The fence contract can fail: a correct in-memory fence passes every case, and each planted
// broken fence — the claim that does not persist above all — fails the cases meant to catch
// it, run through the kit's own in-process runner (runFenceContract).

/** What the resource keeps for all instances: marks, applied keys and data, per scope. */
interface Resource {
  marks: Map<string, { mark: bigint; claimed: boolean }>;
  keys: Set<string>;
  data: Map<string, string[]>;
  /** Claims kept only while the fence's process runs (the flaw claimNotDurable); a restart drops them. */
  volatile: Map<string, { mark: bigint; claimed: boolean }>;
}

interface Flaws {
  /** claim() keeps the mark in the instance, not in the resource: lost on another instance or a re-open. */
  claimInMemory?: boolean;
  /** claim() is seen by every instance but never written durably: a restart of the fence loses it. */
  claimNotDurable?: boolean;
  /** Reads the mark, yields, then writes: racing writers both pass. */
  checkThenWrite?: boolean;
  /** Compares tokens as JS numbers (2^53 and 2^53+1 are equal). */
  numbers?: boolean;
  /** Parses tokens with BigInt(), which takes ' 5', '0x10' and '' (as 0). */
  looseParse?: boolean;
  /** Looks the idempotency key up before the mark: a superseded writer's retry is a duplicate. */
  keyFirst?: boolean;
}

function memoryFence(name: string, flaws: Flaws = {}): FenceHarness {
  const r: Resource = { marks: new Map(), keys: new Set(), data: new Map(), volatile: new Map() };
  const parse = (t: bigint | string): bigint => {
    if (!flaws.looseParse) return parseToken(t);
    try {
      return BigInt(t);
    } catch {
      throw invalidArgument('token', 'not a number', t);
    }
  };
  const passes = (policy: FencePolicy, t: bigint, m: { mark: bigint; claimed: boolean }) => {
    const [a, b] = flaws.numbers ? [Number(t), Number(m.mark)] : [t, m.mark];
    return policy === '>=' ? a >= b : a > b || (a === b && m.claimed);
  };
  return {
    name,
    restart() {
      r.volatile.clear();
      return Promise.resolve();
    },
    open(policy) {
      const local = new Map<string, { mark: bigint; claimed: boolean }>();
      const markOf = (scope: string) =>
        local.get(scope) ??
        r.volatile.get(scope) ??
        r.marks.get(scope) ?? { mark: 0n, claimed: false };
      return {
        async write(scope, token, value, o): Promise<FenceWriteOutcome> {
          const t = parse(token);
          const key = `${scope}\n${t}\n${o?.idempotencyKey}`;
          const m = markOf(scope);
          // The mark first: a retried key below it is stale (flaw: the key first).
          if (!flaws.keyFirst && !passes('>=', t, m))
            return { status: 'stale_fence', highWaterMark: m.mark };
          if (o?.idempotencyKey !== undefined && r.keys.has(key)) return { status: 'duplicate' };
          if (!passes(policy, t, m)) return { status: 'stale_fence', highWaterMark: m.mark };
          if (flaws.checkThenWrite) await new Promise((res) => setImmediate(res));
          r.marks.set(scope, { mark: t > m.mark ? t : m.mark, claimed: false });
          local.delete(scope);
          r.volatile.delete(scope);
          if (o?.idempotencyKey !== undefined) r.keys.add(key);
          r.data.set(scope, [...(r.data.get(scope) ?? []), value]);
          return { status: 'applied' };
        },
        claim(scope, token): ClaimResult {
          const t = parse(token);
          const m = markOf(scope);
          if (!passes(policy, t, m)) return { status: 'stale_fence', highWaterMark: m.mark };
          const next = { mark: t, claimed: t > m.mark || m.claimed };
          (flaws.claimInMemory ? local : flaws.claimNotDurable ? r.volatile : r.marks).set(
            scope,
            next,
          );
          return { status: 'applied' };
        },
        accepted: (scope) => Promise.resolve(r.data.get(scope) ?? []),
        close: () => undefined,
      };
    },
  };
}

async function failedCases(h: FenceHarness): Promise<string[]> {
  const outcomes = await runFenceContract(h);
  return outcomes.filter((o) => o.status === 'failed').map((o) => o.name);
}

describe('the fence contract can fail', () => {
  it('a correct in-memory fence passes every case', async () => {
    const outcomes = await runFenceContract(memoryFence('correct'));
    assert.equal(outcomes.length, fenceContractCases.length);
    for (const o of outcomes)
      assert.equal(
        o.status,
        'passed',
        `${o.name}: ${o.status === 'failed' ? String(o.error) : o.status}`,
      );
  });

  const planted: Array<[string, Flaws, string[]]> = [
    [
      'a claim that does not persist (kept by the instance that made it)',
      { claimInMemory: true },
      ['a claim installs the generation', 'a claim is durable'],
    ],
    [
      'a claim that does not persist across a restart (seen by every instance, never stored)',
      { claimNotDurable: true },
      ['a claim is durable'],
    ],
    ['a check and write that are not atomic', { checkThenWrite: true }, ['writers racing']],
    ['tokens compared as JS numbers', { numbers: true }, ['64-bit integers']],
    ['tokens parsed with BigInt()', { looseParse: true }, ['malformed tokens', 'spaces around']],
    [
      'a retried key answered duplicate below the mark',
      { keyFirst: true },
      ['a retried key below the mark'],
    ],
  ];
  for (const [what, flaws, expected] of planted) {
    it(`catches ${what}`, { timeout: 120_000 }, async () => {
      const failed = await failedCases(memoryFence(what, flaws));
      for (const fragment of expected)
        assert.ok(
          failed.some((n) => n.includes(fragment)),
          `no failed case names "${fragment}"; failed: ${JSON.stringify(failed)}`,
        );
    });
  }
});
