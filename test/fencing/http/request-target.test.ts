import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { checkRequestTarget, TARGET_RULES } from '../../../src/fencing/http/request-target.js';

const ruleOf = (t: string): string => {
  const r = checkRequestTarget(t);
  return r.status === 'canonical' ? 'canonical' : r.rule;
};

describe('checkRequestTarget: one canonical target or the rule it broke', () => {
  it('passes what HTTP clients send, and splits path from query', () => {
    for (const t of [
      '/',
      '/reports/july',
      '/reports/july/',
      '/reports/caf%C3%A9',
      '/reports/a%20b?x=1&y=%2F..',
      "/a/b-c_d.e~f/!$&'()*+,=:@",
      '/q?ids[]=1&f={a}|b^`c',
      '/a/b...c/v1.2',
    ])
      assert.equal(ruleOf(t), 'canonical', t);
    assert.deepEqual(checkRequestTarget('/r/j?x=1'), {
      status: 'canonical',
      target: '/r/j?x=1',
      path: '/r/j',
      query: '?x=1',
    });
  });

  it('names the rule of each target parsers read differently', () => {
    const cases: Array<[string, string]> = [
      ['http://h/reports/july', 'not_origin_form'],
      ['*', 'not_origin_form'],
      ['', 'not_origin_form'],
      ['/reports/july#f', 'fragment'],
      ['/r?x=#', 'fragment'],
      ['/reports/x\\..\\july', 'backslash'],
      ['/r?q=a\\b', 'backslash'],
      ['/reports/./july', 'dot_segment'],
      ['/reports/../july', 'dot_segment'],
      ['/reports/..', 'dot_segment'],
      ['/reports/..x', 'dot_segment'],
      ['/reports/x../y', 'dot_segment'],
      ['/reports/.?x', 'dot_segment'],
      ['//reports', 'empty_segment'],
      ['/reports//july', 'empty_segment'],
      ['/reports/a%2Fb', 'encoded_separator'],
      ['/reports/a%2fb', 'encoded_separator'],
      ['/reports/a%5Cb', 'encoded_separator'],
      ['/reports/%2e%2e', 'encoded_separator'],
      ['/reports/a%00', 'encoded_separator'],
      ['/reports/%41', 'encoded_unreserved'],
      ['/reports/%7e', 'encoded_unreserved'],
      ['/reports/%5F', 'encoded_unreserved'],
      ['/reports/%', 'bad_percent_encoding'],
      ['/reports/%ZZ', 'bad_percent_encoding'],
      ['/reports/%C3', 'bad_percent_encoding'],
      ['/r?x=%G1', 'bad_percent_encoding'],
      ['/reports/july;v=1', 'path_parameter'],
      ['/reports/a b', 'invalid_character'],
      ['/reports/é', 'invalid_character'],
      ['/reports/a\tb', 'invalid_character'],
      ['/reports/"x"', 'invalid_character'],
      ['/reports/[x]', 'invalid_character'],
      ['/r?x=<y>', 'invalid_character'],
    ];
    for (const [t, rule] of cases) assert.equal(ruleOf(t), rule, t);
    const r = checkRequestTarget('/reports/x\\..\\july');
    assert.ok(r.status === 'refused');
    assert.equal(r.message, "request target refused (backslash): '\\' at offset 10");
    for (const [, rule] of cases)
      assert.ok((TARGET_RULES as readonly string[]).includes(rule), rule);
  });

  it('a canonical path is read as itself by the WHATWG URL parser (property)', () => {
    const char = fc.constantFrom(
      ..."abcXYZ019-._~!$&'()*+,=:@".split(''),
      '%20',
      '%25',
      '%C3%A9',
      '%3F',
      '%23',
      '%3B',
      '.',
      '/',
      '\\',
      '%2F',
      '%2e',
      ';',
      '#',
      '?',
    );
    fc.assert(
      fc.property(fc.array(char, { minLength: 0, maxLength: 24 }), (parts) => {
        const target = '/' + parts.join('');
        const r = checkRequestTarget(target);
        if (r.status !== 'canonical') return;
        const u = new URL(target, 'http://upstream');
        assert.equal(u.pathname, r.path, target);
        assert.equal(u.hash, '', target);
      }),
      { numRuns: 20_000 },
    );
  });
});
