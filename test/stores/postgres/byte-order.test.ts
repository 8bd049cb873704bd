import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { byteOrder, sortByKeyBytes } from '../../../src/stores/postgres/batches.js';

const bytes = (a: string, b: string): number =>
  Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

describe('byteOrder (the order PostgreSQL batches lock rows in)', () => {
  it('orders keys exactly as their UTF-8 bytes, surrogates and lone surrogates included', () => {
    const cases: Array<[string, string]> = [
      ['a', 'b'],
      ['bench/renew/x/10', 'bench/renew/x/2'],
      ['same', 'same'],
      ['pre', 'prefix'],
      ['\uffff', '\u{10000}'],
      ['\ue000', '\ud800\udc00'],
      ['x\ud800', 'x\ud800\udc00'],
      ['x\ud800a', 'x\ud800\udc00'],
      ['\ud800\udc00', '\ud800\ue000'],
      ['x\udc00', 'x\udc00y'],
      ['\ufffd', '\ud800'],
      ['é', 'z'],
    ];
    for (const [a, b] of cases) {
      assert.equal(byteOrder(a, b), bytes(a, b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
      assert.equal(byteOrder(b, a), bytes(b, a), `${JSON.stringify(b)} vs ${JSON.stringify(a)}`);
    }
    const unit = fc.oneof(
      fc.constantFrom('a', 'z', '/', 'é', '\u07ff', '\u0800', '\ue000', '\uffff', '\ufffd'),
      fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff', '\u{10000}', '\u{10ffff}'),
    );
    const key = fc.array(unit, { maxLength: 6 }).map((u) => u.join(''));
    fc.assert(
      fc.property(key, key, (a, b) => Math.sign(byteOrder(a, b)) === Math.sign(bytes(a, b))),
      { numRuns: 20_000 },
    );
  });

  it('sorts a batch into that order, with or without surrogates in its keys', () => {
    const plain = fc.constantFrom(
      'a',
      'z',
      '/',
      '0',
      '9',
      'é',
      '\u07ff',
      '\u0800',
      '\ue000',
      '\uffff',
    );
    const surrogate = fc.constantFrom('\ud800', '\udc00', '\u{10000}', '\u{10ffff}');
    for (const unit of [plain, fc.oneof(plain, surrogate)]) {
      const key = fc.array(unit, { maxLength: 5 }).map((u) => `tenant/${u.join('')}`);
      fc.assert(
        fc.property(fc.array(key, { maxLength: 40 }), (keys) => {
          const order = sortByKeyBytes(
            keys.map((_, i) => i),
            (i) => keys[i]!,
          );
          assert.deepEqual(
            [...order].sort((x, y) => x - y),
            keys.map((_, i) => i),
          );
          for (let k = 1; k < order.length; k++) {
            assert.ok(bytes(keys[order[k - 1]!]!, keys[order[k]!]!) <= 0, JSON.stringify(keys));
          }
        }),
        { numRuns: 2_000 },
      );
    }
  });
});
