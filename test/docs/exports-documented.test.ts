import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * The API reference is the JSDoc on the public exports (editors and the shipped .d.ts show it):
 * every name exported by a public entry point must have a doc comment where it is declared.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The source entry point of each public subpath, from package.json's exports (dist → src). */
function entryPoints(): Map<string, string> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { default: string }>;
  };
  const out = new Map<string, string>();
  for (const [sub, target] of Object.entries(pkg.exports)) {
    if (typeof target === 'string') continue; // ./package.json
    out.set(sub, join(ROOT, target.default.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts')));
  }
  return out;
}

/** The doc comment of a declaration (or of the statement holding it), '' when none. */
function docOf(decl: ts.Declaration): string {
  let node: ts.Node = decl;
  // `export const X = …` keeps its comment on the variable statement.
  if (ts.isVariableDeclaration(node)) node = node.parent.parent;
  const tags = ts.getJSDocCommentsAndTags(node);
  return tags
    .map((t) =>
      typeof t.comment === 'string' ? t.comment : (t.comment ?? []).map((c) => c.text).join(''),
    )
    .join(' ')
    .trim();
}

describe('the public API is documented', () => {
  const entries = entryPoints();
  const program = ts.createProgram([...entries.values()], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();

  it('finds every entry point', () => {
    for (const [sub, file] of entries) assert.ok(program.getSourceFile(file), `${sub}: ${file}`);
    assert.ok(entries.size >= 15);
  });

  it('every export of every public subpath has a doc comment', (t) => {
    const missing: string[] = [];
    let counted = 0;
    for (const [sub, file] of entries) {
      const source = program.getSourceFile(file)!;
      const moduleSymbol = checker.getSymbolAtLocation(source);
      assert.ok(moduleSymbol, file);
      for (const exported of checker.getExportsOfModule(moduleSymbol)) {
        counted++;
        const symbol =
          exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        const decls = symbol.declarations ?? [];
        if (!decls.some((d) => docOf(d) !== '')) {
          const at = decls[0];
          const where =
            at === undefined
              ? '?'
              : `${at.getSourceFile().fileName.slice(ROOT.length)}:${at.getSourceFile().getLineAndCharacterOfPosition(at.getStart()).line + 1}`;
          missing.push(`leasehold${sub.slice(1)} ${exported.name}|${where}`);
        }
      }
    }
    assert.ok(counted > 100, `only ${counted} exports seen`);
    const failing = [...new Set(missing)];
    t.diagnostic(`${counted} exports checked`);
    assert.deepEqual(failing, []);
  });
});
