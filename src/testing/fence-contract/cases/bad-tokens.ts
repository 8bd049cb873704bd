import assert from 'node:assert/strict';
import { uniqueKey } from '../../kit/wait.js';
import { applied, has, rejectsInvalid, withFences } from '../helpers.js';
import type { FenceContractCase } from '../harness.js';

/**
 * Tokens every fence must refuse with a typed error: not canonical decimals (parsers that
 * accept a prefix, a sign, spaces, exponents, other digits), zero, negative, above 2^63-1.
 */
const BAD_TOKENS: readonly (string | bigint)[] = [
  '',
  '0',
  '-1',
  '007',
  '1e3',
  '+5',
  '\u0663',
  '0x10',
  '12abc',
  '1.5',
  '9223372036854775808',
  '99999999999999999999999',
  0n,
  -1n,
  2n ** 63n,
];

/** The fence contract: malformed tokens. */
export const badTokenCases: FenceContractCase[] = [
  {
    name: 'malformed tokens are refused with ERR_INVALID_ARGUMENT on writes and claims, and change nothing',
    async run(h) {
      await withFences(h, '>=', 1, async ([f]) => {
        const scope = uniqueKey('fence-bad');
        applied(await f!.write(scope, 5n, '5:a'), 'write at 5');
        const claims = h.lacks?.claim === undefined;
        for (const bad of BAD_TOKENS) {
          const shown = typeof bad === 'bigint' ? `${bad}n` : JSON.stringify(bad);
          await rejectsInvalid(() => f!.write(scope, bad, 'bad:x'), `write with token ${shown}`);
          if (claims) await rejectsInvalid(() => f!.claim(scope, bad), `claim with token ${shown}`);
        }
        assert.deepEqual(await f!.accepted(scope), ['5:a'], 'no malformed token wrote anything');
        applied(await f!.write(scope, 5n, '5:b'), 'write at 5 after them: the mark did not move');
      });
    },
  },
  {
    name: 'tokens with spaces around them are refused with ERR_INVALID_ARGUMENT, and change nothing',
    async run(h, t) {
      if (!has(h, 'untrimmed tokens', t)) return;
      await withFences(h, '>=', 1, async ([f]) => {
        const scope = uniqueKey('fence-bad-space');
        applied(await f!.write(scope, 5n, '5:a'), 'write at 5');
        for (const bad of [' 6', '6 ', '\t6', '6\n']) {
          await rejectsInvalid(
            () => f!.write(scope, bad, 'bad:x'),
            `write with ${JSON.stringify(bad)}`,
          );
          if (h.lacks?.claim === undefined)
            await rejectsInvalid(() => f!.claim(scope, bad), `claim with ${JSON.stringify(bad)}`);
        }
        assert.deepEqual(await f!.accepted(scope), ['5:a']);
      });
    },
  },
];
