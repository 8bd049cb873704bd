import assert from 'node:assert/strict';
import type { ClaimResult } from '../../../core/results.js';
import { uniqueKey } from '../../kit/wait.js';
import { applied, claimApplied, has, policiesOf, show, stale, withFences } from '../helpers.js';
import type {
  FenceContractCase,
  FenceHarness,
  FencePolicy,
  FenceWriteOutcome,
} from '../harness.js';

/**
 * A refusal that a claim of `mark` caused: `stale_fence` naming `mark`, or under `>` for a
 * harness that lacks 'claimed mark under >' any `stale_fence`.
 */
function staleAfterClaim(
  h: FenceHarness,
  policy: FencePolicy,
  r: FenceWriteOutcome | ClaimResult,
  mark: bigint,
  what: string,
): void {
  if (policy === '>' && h.lacks?.['claimed mark under >'] !== undefined)
    assert.equal(
      r.status,
      'stale_fence',
      `${what}: expected stale_fence, got ${JSON.stringify(show(r))}`,
    );
  else stale(r, mark, what);
}

/** The fence contract: claim before start (DESIGN §4). */
export const claimCases: FenceContractCase[] = [
  {
    name: "a claim installs the generation with no write: 41's write is refused before 42 wrote anything, then 42's first write passes (each policy)",
    async run(h, t) {
      if (!has(h, 'claim', t)) return;
      for (const policy of policiesOf(h)) {
        await withFences(h, policy, 2, async ([a, b]) => {
          const scope = uniqueKey('fence-claim');
          const what = `policy '${policy}'`;
          applied(await a!.write(scope, 41n, '41:A'), `${what}: A's write at 41`);
          await claimApplied(b!, scope, 42n, what);
          assert.deepEqual(await b!.accepted(scope), ['41:A'], `${what}: a claim writes no data`);
          staleAfterClaim(
            h,
            policy,
            await a!.write(scope, 41n, '41:A late'),
            42n,
            `${what}: A's late write`,
          );
          applied(await b!.write(scope, 42n, '42:B'), `${what}: B's first write`);
          if (policy === '>')
            stale(await b!.write(scope, 42n, '42:B again'), 42n, `${what}: B's second write`);
          assert.deepEqual(await b!.accepted(scope), ['41:A', '42:B']);
        });
      }
    },
  },
  {
    name: 'a repeated claim is applied, and a claim below a newer claim or write answers stale_fence and changes nothing',
    async run(h, t) {
      if (!has(h, 'claim', t)) return;
      for (const policy of policiesOf(h)) {
        await withFences(h, policy, 2, async ([a, b]) => {
          const scope = uniqueKey('fence-claim-stale');
          const what = `policy '${policy}'`;
          await claimApplied(b!, scope, 42n, `${what}: first claim`);
          await claimApplied(b!, scope, 42n, `${what}: the same claim again`);
          staleAfterClaim(
            h,
            policy,
            await a!.claim(scope, 41n),
            42n,
            `${what}: claim at 41 after 42's claim`,
          );
          applied(await b!.write(scope, 42n, '42:B'), `${what}: 42's write after the claims`);
          applied(await b!.write(scope, 43n, '43:C'), `${what}: a newer writer`);
          stale(await a!.claim(scope, 42n), 43n, `${what}: claim at 42 after 43 wrote`);
          assert.deepEqual(await a!.accepted(scope), ['42:B', '43:C']);
        });
      }
    },
  },
  {
    name: "policy '>': a claim after its token wrote answers stale_fence (the grant's one write is spent)",
    async run(h, t) {
      if (!has(h, 'claim', t) || !has(h, 'policy >', t) || !has(h, 'claim by policy', t)) return;
      await withFences(h, '>', 1, async ([f]) => {
        const scope = uniqueKey('fence-claim-spent');
        applied(await f!.write(scope, 7n, '7:a'), 'write at 7');
        stale(await f!.claim(scope, 7n), 7n, 'claim at 7 after 7 wrote');
        stale(await f!.write(scope, 7n, '7:b'), 7n, 'second write at 7');
        assert.deepEqual(await f!.accepted(scope), ['7:a']);
      });
    },
  },
  {
    name: 'a claim is durable: after the fence is closed and opened again, the lower token is still refused and the claimed token still writes',
    async run(h, t) {
      if (!has(h, 'claim', t)) return;
      for (const policy of policiesOf(h)) {
        const scope = uniqueKey('fence-claim-durable');
        const what = `policy '${policy}'`;
        await withFences(h, policy, 1, async ([f]) => {
          applied(await f!.write(scope, 41n, '41:A'), `${what}: write at 41`);
          await claimApplied(f!, scope, 42n, what);
        });
        await h.restart?.();
        await withFences(h, policy, 1, async ([f]) => {
          staleAfterClaim(
            h,
            policy,
            await f!.write(scope, 41n, '41:A late'),
            42n,
            `${what}: 41 after the re-open`,
          );
          applied(await f!.write(scope, 42n, '42:B'), `${what}: 42's first write after it`);
          assert.deepEqual(await f!.accepted(scope), ['41:A', '42:B']);
        });
      }
    },
  },
];
