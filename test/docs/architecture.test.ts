import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * docs/architecture.md cannot go false: its layer table is the lint's (`LAYERS` in
 * eslint.config.js), every folder and file of src/ has a layer, each lint exception still
 * matches an import, and the page's "Files above 400 lines" names the lint's allow-list, which
 * only shrinks.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SRC = join(ROOT, 'src');

/**
 * How many files `LONG_FILES` may name at most. Lower it when the list shrinks; never raise it
 * (split the file instead).
 */
const LONG_FILES_RECORDED = 0;

interface Layer {
  readonly name: string;
  readonly paths: readonly string[];
}
interface LayerException {
  readonly from: string;
  readonly to: string;
  readonly issue: number;
}
interface ArchitectureConfig {
  readonly LAYERS: readonly Layer[];
  readonly LAYER_EXCEPTIONS: readonly LayerException[];
  readonly MAX_LINES: number;
  readonly LONG_FILES: Readonly<Record<string, string>>;
}

const config = (await import(
  pathToFileURL(join(ROOT, 'eslint.config.js')).href
)) as ArchitectureConfig;
const page = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');

/** The text of the page's section under `## title`, up to the next `## `. */
function section(title: string): string {
  const start = page.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `docs/architecture.md has a "## ${title}" section`);
  const end = page.indexOf('\n## ', start + 1);
  return page.slice(start, end < 0 ? undefined : end);
}

/** The rows of the page's layer table, top first: the layer's name and its paths. */
function pageLayers(): Layer[] {
  const rows = section('Layers')
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .slice(2); // the header and its rule
  return rows.map((row) => {
    const cells = row.split('|').map((c) => c.trim());
    return {
      name: cells[1]!.replace(/`/g, ''),
      paths: [...cells[2]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!),
    };
  });
}

/** Every file under `dir`, as paths relative to src/ with `/`. */
function filesUnder(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) filesUnder(path, out);
    else out.push(relative(SRC, path).split('\\').join('/'));
  }
  return out;
}

/** The layer holding `path` most closely, as the lint rule finds it. */
function layerOf(path: string): string | undefined {
  let best: string | undefined;
  let length = -1;
  for (const layer of config.LAYERS) {
    for (const p of layer.paths) {
      const holds = p.endsWith('/') ? path.startsWith(p) : path === p;
      if (holds && p.length > length) [best, length] = [layer.name, p.length];
    }
  }
  return best;
}

/** Every relative import of a .ts file of src/: importer and imported, relative to src/. */
function imports(): Array<{ from: string; to: string }> {
  const out: Array<{ from: string; to: string }> = [];
  const specifier =
    /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]|require\(['"](\.{1,2}\/[^'"]+)['"]\)/g;
  for (const from of filesUnder(SRC).filter((f) => f.endsWith('.ts'))) {
    const text = readFileSync(join(SRC, from), 'utf8');
    for (const m of text.matchAll(specifier)) {
      const target = resolve(dirname(join(SRC, from)), (m[1] ?? m[2])!);
      out.push({ from, to: relative(SRC, target).split('\\').join('/').replace(/\.js$/, '.ts') });
    }
  }
  return out;
}

/** Lines as `wc -l` counts them (and ESLint's max-lines, comments and blank lines included). */
const lineCount = (file: string): number =>
  readFileSync(join(ROOT, file), 'utf8').split('\n').length - 1;

describe('docs/architecture.md and the lint rules agree with the code', () => {
  it('the page lists the layers of eslint.config.js, top first, with the same paths', () => {
    const lint = [...config.LAYERS].reverse().map((l) => ({ name: l.name, paths: [...l.paths] }));
    assert.deepEqual(pageLayers(), lint);
  });

  it('every path of a layer is in src/, and every folder and file of src/ has a layer', () => {
    for (const layer of config.LAYERS) {
      for (const p of layer.paths) {
        const isDir = statSync(join(SRC, p), { throwIfNoEntry: false })?.isDirectory();
        assert.equal(isDir, p.endsWith('/'), `layer ${layer.name}: src/${p}`);
      }
    }
    const unplaced = filesUnder(SRC).filter((f) => layerOf(f) === undefined);
    assert.deepEqual(unplaced, [], 'files of src/ in no layer (add them to LAYERS and the page)');
  });

  it('each lint exception names its issue and still matches an import', () => {
    const all = imports();
    for (const e of config.LAYER_EXCEPTIONS) {
      assert.ok(Number.isInteger(e.issue) && e.issue > 0, `${e.from} -> ${e.to}: an issue`);
      assert.ok(
        all.some((i) => i.from.startsWith(e.from) && i.to.startsWith(e.to)),
        `no import from ${e.from} to ${e.to} is left: take the exception off LAYER_EXCEPTIONS`,
      );
      assert.match(page, new RegExp(`issue ${e.issue}\\b`), `the page names issue ${e.issue}`);
    }
  });

  it('no import of src/ runs up a layer, beyond the exceptions', () => {
    // The lint rule is the check that runs on every edit; this one keeps the page's promise
    // even where lint is not run, with the same table.
    const rank = new Map(config.LAYERS.map((l, i) => [l.name, i]));
    const upward = imports().filter(({ from, to }) => {
      if (config.LAYER_EXCEPTIONS.some((e) => from.startsWith(e.from) && to.startsWith(e.to))) {
        return false;
      }
      const a = layerOf(from);
      const b = layerOf(to);
      return a !== undefined && b !== undefined && rank.get(b)! > rank.get(a)!;
    });
    assert.deepEqual(upward, []);
  });

  it('LONG_FILES names exactly the files of src/ over MAX_LINES, and only shrinks', () => {
    const over = filesUnder(SRC)
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `src/${f}`)
      .filter((f) => lineCount(f) > config.MAX_LINES);
    const listed = Object.keys(config.LONG_FILES);
    for (const f of listed) {
      assert.ok(
        over.includes(f),
        `${f} is no longer over ${config.MAX_LINES} lines: take it off LONG_FILES (and the page), and lower LONG_FILES_RECORDED`,
      );
      assert.ok(config.LONG_FILES[f]!.length > 0, `${f}: a reason`);
    }
    assert.deepEqual([...over].sort(), [...listed].sort(), 'files over the limit, not listed');
    assert.ok(
      listed.length <= LONG_FILES_RECORDED,
      `LONG_FILES grew to ${listed.length} files (recorded: ${LONG_FILES_RECORDED}): split a file instead`,
    );
  });

  it('the page names the same long files, and their number', () => {
    const text = section('Files above 400 lines');
    assert.match(text, new RegExp(`longer than ${config.MAX_LINES} lines`));
    const named = [...text.matchAll(/`([^`]+\.ts)`/g)].map((m) => `src/${m[1]!}`);
    assert.deepEqual([...named].sort(), Object.keys(config.LONG_FILES).sort());
    const count = /Today (\d+) files? (?:is|are) over/.exec(text);
    assert.ok(count, 'the page says how many files are over the limit today');
    assert.equal(Number(count[1]), Object.keys(config.LONG_FILES).length);
  });
});
