import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '../../src/core/duration.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { parseToken, validateKey } from '../../src/core/validate.js';

const invalid = (fn: () => unknown, what: string): void =>
  assert.throws(fn, (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'), what);

describe('durations', () => {
  it('accepts milliseconds and unit strings', () => {
    assert.equal(parseDuration('ttl', 250), 250);
    assert.equal(parseDuration('ttl', '250ms'), 250);
    assert.equal(parseDuration('ttl', '30s'), 30_000);
    assert.equal(parseDuration('ttl', '1.5s'), 1500);
    assert.equal(parseDuration('ttl', '5m'), 300_000);
    assert.equal(parseDuration('ttl', '1h'), 3_600_000);
  });
  it('refuses everything ambiguous', () => {
    for (const v of [
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      -0,
      '1000',
      ' 1s',
      '1s ',
      '1.5ms',
      '1e3ms',
      '-1s',
      'ten s',
      10n,
      null,
      {},
      [],
    ]) {
      invalid(
        () => parseDuration('ttl', v),
        `duration ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x))}`,
      );
    }
  });
});

describe('fencing tokens', () => {
  it('accepts bigints and canonical decimal strings up to int64', () => {
    assert.equal(parseToken('1'), 1n);
    assert.equal(parseToken('9007199254740993'), 9007199254740993n, '2^53 + 1 keeps its precision');
    assert.equal(parseToken('9223372036854775807'), 9223372036854775807n);
    assert.equal(parseToken(42n), 42n);
  });
  it('refuses every malformed token from the verification list', () => {
    for (const v of [
      '',
      '007',
      '1e3',
      ' 5',
      '5 ',
      '+5',
      '٣',
      '0x10',
      '12abc',
      '0',
      '-1',
      '1.5',
      '9223372036854775808',
      '99999999999999999999',
      null,
      undefined,
      [1],
      { $gt: 0 },
      true,
      5,
      2 ** 53 + 1,
      0n,
      -3n,
      2n ** 63n,
    ]) {
      invalid(() => parseToken(v), `token ${JSON.stringify(typeof v === 'bigint' ? `${v}n` : v)}`);
    }
  });
  it('compares as integers, not strings: 10 > 9', () => {
    assert.ok(parseToken('10') > parseToken('9'));
  });
});

describe('keys', () => {
  it('accepts prefixes, glob and SQL characters as plain text', () => {
    for (const k of [
      'locks/a',
      'locks/a/b',
      '*?[]',
      '{tag}',
      "'; DROP TABLE x; --",
      '%_',
      'é',
      'e\u0301',
      'x'.repeat(1024),
    ]) {
      assert.equal(validateKey(k), k);
    }
  });
});
