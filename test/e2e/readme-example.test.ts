import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { tempDir } from '../support/tmp.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BUILD_SRC = join(ROOT, 'build', 'src');

/** The README's TypeScript blocks, in order. */
function readmeBlocks(): string[] {
  const text = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe('README', () => {
  it('its first code example runs as written and prints the token', () => {
    const [example] = readmeBlocks();
    assert.ok(example, 'the README has a ts example');
    const rewired = example
      .replace(/from 'leasehold'/g, `from '${join(BUILD_SRC, 'index.js')}'`)
      .replace(
        /from 'leasehold\/(\w+)'/g,
        (_m, sub: string) => `from '${join(BUILD_SRC, 'stores', sub, 'index.js')}'`,
      );
    const js = ts.transpileModule(rewired, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const tmp = tempDir('readme');
    try {
      const file = join(tmp.dir, 'example.mjs');
      writeFileSync(file, js);
      const run = (): { status: number | null; stdout: string; stderr: string } =>
        spawnSync(process.execPath, [file], { cwd: tmp.dir, encoding: 'utf8', timeout: 30_000 });
      const first = run();
      assert.equal(first.status, 0, first.stderr);
      assert.match(first.stdout, /^token 1, valid for \d+ms$/m);
      // Run again on the same file: the token keeps increasing, and the lease was released.
      const second = run();
      assert.equal(second.status, 0, second.stderr);
      assert.match(second.stdout, /^token 2, valid for \d+ms$/m);
    } finally {
      tmp.remove();
    }
  });
});
