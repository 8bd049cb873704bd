import assert from 'node:assert/strict';
import { uniqueKey } from '../../kit/wait.js';
import { applied, has, stale, withFences } from '../helpers.js';
import type { FenceContractCase } from '../harness.js';

/** The fence contract: the seed's story and the two policies. */
export const policyCases: FenceContractCase[] = [
  {
    name: "the seed's story: token 33 paused before its write, 34 takes over and writes, then 33's late write is refused and never reaches the data",
    async run(h) {
      await withFences(h, '>=', 2, async ([a, b]) => {
        const scope = uniqueKey('fence-seed');
        applied(await a!.write(scope, 33n, '33:A first'), "A's write before its pause");
        // A stalls here (a GC pause); its lease expires and B takes the lease with 34.
        applied(await b!.write(scope, 34n, '34:B result'), "B's write");
        stale(await a!.write(scope, 33n, '33:A late'), 34n, "A's late write");
        assert.deepEqual(
          await b!.accepted(scope),
          ['33:A first', '34:B result'],
          "B's result stands; A's late write is not in the data",
        );
      });
    },
  },
  {
    name: "policy '>=': several writes under one token pass, a newer token passes, an older one is refused",
    async run(h, t) {
      if (!has(h, 'policy >=', t)) return;
      await withFences(h, '>=', 1, async ([f]) => {
        const scope = uniqueKey('fence-ge');
        applied(await f!.write(scope, 41n, '41:a'), 'first write at 41');
        applied(await f!.write(scope, 41n, '41:b'), 'second write at 41');
        applied(await f!.write(scope, 42n, '42:a'), 'write at 42');
        applied(await f!.write(scope, 42n, '42:b'), 'second write at 42');
        stale(await f!.write(scope, 41n, '41:c'), 42n, 'write at 41 after 42');
        assert.deepEqual(await f!.accepted(scope), ['41:a', '41:b', '42:a', '42:b']);
      });
    },
  },
  {
    name: "policy '>': one write per token; the same token again is refused, a newer one passes",
    async run(h, t) {
      if (!has(h, 'policy >', t)) return;
      await withFences(h, '>', 1, async ([f]) => {
        const scope = uniqueKey('fence-gt');
        applied(await f!.write(scope, 41n, '41:a'), 'first write at 41');
        stale(await f!.write(scope, 41n, '41:b'), 41n, 'second write at 41');
        applied(await f!.write(scope, 42n, '42:a'), 'first write at 42');
        stale(await f!.write(scope, 41n, '41:c'), 42n, 'write at 41 after 42');
        stale(await f!.write(scope, 42n, '42:b'), 42n, 'second write at 42');
        assert.deepEqual(await f!.accepted(scope), ['41:a', '42:a']);
      });
    },
  },
  {
    name: 'tokens compare as 64-bit integers, never as strings or doubles: 10 after 9, 2^53+1 after 2^53, up to 2^63-1',
    async run(h) {
      await withFences(h, '>=', 1, async ([f]) => {
        const scope = uniqueKey('fence-int');
        applied(await f!.write(scope, '9', '9:a'), 'write at 9');
        applied(await f!.write(scope, '10', '10:a'), "write at 10 (as strings, '10' < '9')");
        stale(await f!.write(scope, '9', '9:b'), 10n, 'write at 9 after 10');
        const big = 2n ** 53n;
        applied(await f!.write(scope, big, `${big}:a`), 'write at 2^53');
        applied(await f!.write(scope, big + 1n, `${big + 1n}:a`), 'write at 2^53+1');
        // As doubles 2^53 and 2^53+1 are equal: a fence that rounds lets this through.
        stale(await f!.write(scope, big, `${big}:b`), big + 1n, 'write at 2^53 after 2^53+1');
        const max = 2n ** 63n - 1n;
        applied(await f!.write(scope, (max - 1n).toString(), `${max - 1n}:a`), 'write at 2^63-2');
        applied(await f!.write(scope, max, `${max}:a`), 'write at 2^63-1');
        stale(
          await f!.write(scope, max - 1n, `${max - 1n}:b`),
          max,
          'write at 2^63-2 after 2^63-1',
        );
        assert.equal((await f!.accepted(scope)).length, 6);
      });
    },
  },
  {
    name: 'scopes are isolated: a mark on one scope leaves every other scope alone, even one it is a prefix of',
    async run(h) {
      await withFences(h, '>=', 1, async ([f]) => {
        const base = uniqueKey('fence-scope');
        applied(await f!.write(`${base}/a`, 50n, '50:a'), 'write at 50 on a');
        applied(await f!.write(`${base}/a/b`, 1n, '1:ab'), 'write at 1 on a/b');
        applied(await f!.write(`${base}/a`.toUpperCase(), 1n, '1:A'), 'write at 1 on A');
        applied(await f!.write(base, 2n, '2:base'), 'write at 2 on the parent');
        stale(await f!.write(`${base}/a`, 49n, '49:a'), 50n, 'write at 49 on a');
        assert.deepEqual(await f!.accepted(`${base}/a`), ['50:a']);
        assert.deepEqual(await f!.accepted(`${base}/a/b`), ['1:ab']);
        assert.deepEqual(await f!.accepted(base), ['2:base']);
      });
    },
  },
];
