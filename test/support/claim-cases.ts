import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { ClaimResult } from '../../src/core/results.js';

/**
 * One fence as the claim cases see it, opened with one policy: a claim, a fenced write of the
 * scope (its status), and the scope's mark. `write` must really write (the cases check that a
 * refused write left the data alone through `data`).
 */
export interface ClaimSubject {
  claim(scope: string, token: bigint | string): Promise<ClaimResult>;
  write(scope: string, token: bigint, body: string): Promise<string>;
  mark(scope: string): Promise<bigint>;
  /** What the last applied write left (undefined when none). */
  data(scope: string): Promise<string | undefined>;
}

/**
 * The claim rule every fence keeps (claim before start, DESIGN §4, I9), as `it` cases: a
 * claim at T is applied exactly when a write at T would pass, leaves the mark at T, refuses
 * lower tokens from then on, and does not use T's write — under '>' the first write at T
 * still passes. `open(policy)` gives a fence on fresh or shared storage; `scope()` a scope no
 * other case uses.
 */
export function claimCases(open: (policy: '>=' | '>') => ClaimSubject, scope: () => string): void {
  for (const policy of ['>=', '>'] as const) {
    it(`policy '${policy}': a claim at 42 refuses token 41 before 42 has written anything`, async () => {
      const f = open(policy);
      const s = scope();
      assert.equal(await f.write(s, 41n, 'by-41'), 'applied');
      assert.deepEqual(await f.claim(s, 42n), { status: 'applied' });
      assert.equal(await f.mark(s), 42n);
      assert.equal(await f.write(s, 41n, 'late-41'), 'stale_fence');
      assert.equal(await f.write(s, 40n, 'later-40'), 'stale_fence');
      assert.equal(await f.data(s), 'by-41', 'no domain write by the claim, none by the stale');
    });

    it(`policy '${policy}': re-claiming the same token is idempotent`, async () => {
      const f = open(policy);
      const s = scope();
      assert.deepEqual(await f.claim(s, 42n), { status: 'applied' });
      assert.deepEqual(await f.claim(s, 42n), { status: 'applied' });
      assert.deepEqual(await f.claim(s, '42'), { status: 'applied' });
      assert.equal(await f.mark(s), 42n);
      assert.equal(await f.data(s), undefined);
    });

    it(`policy '${policy}': a claim below a newer claim or write is stale and changes nothing`, async () => {
      const f = open(policy);
      const s = scope();
      assert.deepEqual(await f.claim(s, 43n), { status: 'applied' });
      assert.deepEqual(await f.claim(s, 42n), { status: 'stale_fence', highWaterMark: 43n });
      assert.equal(await f.write(s, 44n, 'by-44'), 'applied');
      assert.deepEqual(await f.claim(s, 43n), { status: 'stale_fence', highWaterMark: 44n });
      assert.equal(await f.mark(s), 44n);
    });

    it(`policy '${policy}': malformed tokens and scopes throw ERR_INVALID_ARGUMENT and touch nothing`, async () => {
      const f = open(policy);
      const s = scope();
      for (const bad of [41, '007', ' 5', '1e3', '', '0', '-1', '9223372036854775808', null]) {
        await assert.rejects(
          async () => f.claim(s, bad as unknown as bigint),
          (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
          String(bad),
        );
      }
      for (const bad of ['', 7, undefined])
        await assert.rejects(
          async () => f.claim(bad as unknown as string, 5n),
          (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
        );
      assert.equal(await f.mark(s), 0n);
    });
  }

  it("policy '>=': after a claim the same token writes as often as before", async () => {
    const f = open('>=');
    const s = scope();
    assert.equal((await f.claim(s, 42n)).status, 'applied');
    assert.equal(await f.write(s, 42n, 'first'), 'applied');
    assert.equal(await f.write(s, 42n, 'second'), 'applied');
    assert.deepEqual(await f.claim(s, 42n), { status: 'applied' });
    assert.equal(await f.data(s), 'second');
  });

  it("policy '>': the claim does not use the grant's one write; the first write at 42 passes, the second is refused", async () => {
    const f = open('>');
    const s = scope();
    assert.equal(await f.write(s, 41n, 'by-41'), 'applied');
    assert.equal((await f.claim(s, 42n)).status, 'applied');
    assert.equal((await f.claim(s, 42n)).status, 'applied', 'idempotent before the write');
    assert.equal(await f.write(s, 41n, 'late-41'), 'stale_fence');
    assert.equal(await f.write(s, 42n, 'first'), 'applied');
    assert.equal(await f.write(s, 42n, 'second'), 'stale_fence');
    assert.deepEqual(
      await f.claim(s, 42n),
      { status: 'stale_fence', highWaterMark: 42n },
      "after 42's write, its claim answers that the write is spent",
    );
    assert.equal(await f.data(s), 'first');
    assert.equal(await f.write(s, 43n, 'by-43'), 'applied');
  });

  it("a claim through a '>=' fence leaves a '>' fence on the same storage its first write", async () => {
    const ge = open('>=');
    const gt = open('>');
    const s = scope();
    assert.equal((await ge.claim(s, 7n)).status, 'applied');
    assert.equal(await gt.write(s, 6n, 'six'), 'stale_fence');
    assert.equal(await gt.write(s, 7n, 'seven'), 'applied');
    assert.equal(await gt.write(s, 7n, 'again'), 'stale_fence');
    assert.equal(await ge.write(s, 7n, 'ge'), 'applied');
  });

  it('racing claims and writes of interleaved tokens: each refusal names a higher mark, and the data is the highest applied write', async () => {
    const s = scope();
    const f = open('>=');
    const tokens = Array.from({ length: 24 }, (_, i) => BigInt(((i * 7) % 24) + 1));
    const answers = await Promise.all(
      tokens.map(async (t, i) => {
        if (i % 2 === 0) return { kind: 'claim', token: t, r: await f.claim(s, t) };
        const status = await f.write(s, t, `by-${t}`);
        return { kind: 'write', token: t, r: { status } };
      }),
    );
    let highestWrite = 0n;
    for (const a of answers) {
      if (a.r.status === 'applied') {
        if (a.kind === 'write' && a.token > highestWrite) highestWrite = a.token;
      } else {
        assert.equal(a.r.status, 'stale_fence', `${a.kind} ${a.token}`);
        if (a.kind === 'claim') {
          const hwm = (a.r as { highWaterMark: bigint }).highWaterMark;
          assert.ok(hwm > a.token, `stale claim ${a.token} names mark ${hwm}`);
        }
      }
    }
    assert.equal(await f.mark(s), 24n);
    // A lower write can never land after a higher claim or write: the last data is the highest.
    if (highestWrite > 0n) assert.equal(await f.data(s), `by-${highestWrite}`);
  });
}
