import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** README.md, every Markdown file under docs/ and examples/. */
function markdownFiles(): string[] {
  const out = [join(ROOT, 'README.md')];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.md')) out.push(p);
    }
  };
  for (const dir of ['docs', 'examples']) if (existsSync(join(ROOT, dir))) walk(join(ROOT, dir));
  return out;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const body = text.replace(/^(```|~~~)[\s\S]*?^\1/gm, '');
  for (const m of body.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = m[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  for (const m of body.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

/**
 * Every `[text](target)` and `![alt](target)` link of a file, with its line: outside fenced
 * code blocks and inline code, where brackets are code, not links.
 */
function links(text: string): { target: string; line: number }[] {
  const out: { target: string; line: number }[] = [];
  let fenced = false;
  text.split('\n').forEach((raw, i) => {
    if (/^(```|~~~)/.test(raw)) fenced = !fenced;
    if (fenced) return;
    const line = raw.replace(/`[^`]*`/g, '');
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ target: m[1]!, line: i + 1 });
    }
  });
  return out;
}

describe('links in README.md and docs/', () => {
  const files = markdownFiles();
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (file: string): Set<string> => {
    let a = anchorCache.get(file);
    if (a === undefined) {
      a = anchors(readFileSync(file, 'utf8'));
      anchorCache.set(file, a);
    }
    return a;
  };

  it('computes anchors the way GitHub does', () => {
    const a = anchors('# Dashboard and lesson pages\n## `leasehold run` (cron)\n## A\n## A\n');
    assert.deepEqual([...a], ['dashboard-and-lesson-pages', 'leasehold-run-cron', 'a', 'a-1']);
  });

  it('every relative link points at a file that exists, and every #anchor at a heading', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      for (const { target, line } of links(readFileSync(file, 'utf8'))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: — not checked here
        checked++;
        const [path, anchor] = target.split('#', 2) as [string, string | undefined];
        const where = `${relative(ROOT, file)}:${line}: ${target}`;
        const dest = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
        if (!existsSync(dest)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor !== undefined && anchor !== '') {
          if (!dest.endsWith('.md'))
            broken.push(`${where} (anchor into a file that is not Markdown)`);
          else if (!anchorsOf(dest).has(decodeURIComponent(anchor)))
            broken.push(`${where} (no heading with that anchor)`);
        }
      }
    }
    assert.ok(checked > 20, `only ${checked} links found: is the link pattern right?`);
    assert.deepEqual(broken, []);
  });
});
