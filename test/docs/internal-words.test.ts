import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * Words that mean something only to the people who wrote leasehold: the source texts it was
 * built from, the order work happened in, and decision records named by number where the
 * reader needs what they decided (a link named after the decision says that; a number does not).
 */
const INTERNAL: readonly { readonly what: string; readonly re: RegExp }[] = [
  {
    what: 'the source texts ("the seed\'s statements")',
    re: /\bthe seed['’]s\b|\bseed (statements|upsert|rows?)\b|\bseed 0\d\d\b/i,
  },
  {
    what: 'the source article ("the fencing article\'s protocol")',
    re: /\bthe (fencing )?article\b/i,
  },
  {
    what: 'when we worked ("earlier the same morning")',
    re: /\b(earlier )?the same (morning|afternoon|evening|day)\b/i,
  },
  { what: 'a decision by number in running text', re: /\bdecisions? \d{3}\b/i },
  { what: 'an issue number', re: /\bissue #?\d+\b/i },
  { what: 'a work round', re: /\(round \d+\)/i },
];

/** README.md and docs/*.md (not the decision records, which are the project's own log). */
function userDocs(): string[] {
  return [
    'README.md',
    'CHANGELOG.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((n) => n.endsWith('.md') && n !== 'benchmarks-history.md')
      .map((n) => `docs/${n}`),
  ];
}

/** Markdown with link targets and inline code removed: paths and identifiers may say anything. */
function prose(text: string): string {
  return text.replace(/\]\([^)]*\)/g, ']').replace(/`[^`\n]*`/g, '``');
}

describe('the user docs keep to words a user knows', () => {
  it('README, CHANGELOG and docs/*.md carry none of the internal words', () => {
    const found: string[] = [];
    for (const file of userDocs()) {
      const lines = prose(readFileSync(join(ROOT, file), 'utf8')).split('\n');
      lines.forEach((line, i) => {
        for (const { what, re } of INTERNAL) {
          const m = re.exec(line);
          if (m !== null) found.push(`${file}:${i + 1}: ${what}: "${m[0]}"`);
        }
      });
    }
    assert.deepEqual(found, []);
  });

  it('the check sees each listed phrase (so a pattern that matches nothing fails here)', () => {
    for (const phrase of [
      "the seed's statements",
      "The fencing article's protocol",
      'earlier the same morning',
      'see decision 007 for why',
      'as issue 48 asks',
      'Beyond one key (round 3)',
    ]) {
      assert.ok(
        INTERNAL.some(({ re }) => re.test(prose(phrase))),
        `nothing catches "${phrase}"`,
      );
    }
    assert.equal(
      INTERNAL.some(({ re }) => re.test(prose('the seed picks TTL; [why](decisions/007-x.md)'))),
      false,
      'a random seed and a decision linked by its path are fine',
    );
  });
});
