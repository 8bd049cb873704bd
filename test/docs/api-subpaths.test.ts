import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Each public subpath (`leasehold`, `leasehold/sqlite`, …) → the names it exports. */
function exportsBySubpath(): Map<string, Set<string>> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { default: string }>;
  };
  const files = new Map<string, string>();
  for (const [sub, target] of Object.entries(pkg.exports)) {
    if (typeof target === 'string') continue;
    const file = target.default.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts');
    files.set(`leasehold${sub.slice(1)}`, join(ROOT, file));
  }
  const program = ts.createProgram([...files.values()], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const out = new Map<string, Set<string>>();
  for (const [sub, file] of files) {
    const symbol = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
    out.set(sub, new Set(checker.getExportsOfModule(symbol).map((e) => e.name)));
  }
  return out;
}

const SUBPATH = /`(leasehold(?:\/[a-z/]+)?)`/g;
const NAME = /`([A-Za-z_$][\w$]*)/g;

/**
 * Every name docs/api.md mentions that some subpath exports must be exported by a subpath the
 * same paragraph names, or, when the paragraph names none, by its section's (`## \`leasehold/x\``).
 */
function misplaced(text: string, exportsOf: Map<string, Set<string>>): string[] {
  const all = new Set([...exportsOf.values()].flatMap((s) => [...s]));
  const wrong: string[] = [];
  let section: string | undefined;
  for (const paragraph of text.replace(/^```[\s\S]*?^```/gm, '').split(/\n\s*\n/)) {
    const heading = /^##\s+`(leasehold(?:\/[a-z/]+)?)`/m.exec(paragraph);
    if (heading !== null) section = heading[1];
    else if (/^##\s/m.test(paragraph)) section = undefined;
    const named = [...paragraph.matchAll(SUBPATH)].map((m) => m[1] as string);
    const places = named.length > 0 ? named : section === undefined ? [] : [section];
    if (places.length === 0) continue;
    for (const m of paragraph.matchAll(NAME)) {
      const name = m[1] as string;
      if (!all.has(name)) continue;
      if (!places.some((p) => exportsOf.get(p)?.has(name) === true))
        wrong.push(`${name} is not exported by ${places.join(' or ')}`);
    }
  }
  return wrong;
}

describe('docs/api.md names the subpath each export lives in', () => {
  const exportsOf = exportsBySubpath();

  it('every export it mentions is under the subpath it is listed with', () => {
    const text = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
    assert.deepEqual(misplaced(text, exportsOf), []);
  });

  it('has a section for each of leasehold/testing, leasehold/metrics and leasehold/otel', () => {
    const text = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
    for (const sub of ['leasehold/testing', 'leasehold/metrics', 'leasehold/otel'])
      assert.match(text, new RegExp(`^## \`${sub}\``, 'm'));
  });

  it('would catch the history checker listed under leasehold', () => {
    const wrong = misplaced(
      '## `leasehold`\n\nAlso the history checker (`checkHistory`, `parseHistory`).\n',
      exportsOf,
    );
    assert.deepEqual(wrong, [
      'checkHistory is not exported by leasehold',
      'parseHistory is not exported by leasehold',
    ]);
  });
});
