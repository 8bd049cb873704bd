// Runs every compiled test file under build/test with Node's test runner.
// Usage: node scripts/run-tests.mjs [DIR_OR_FILE_FILTER…]   e.g. `unit`, `contract`.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function collect(dir, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (name.endsWith('.test.js')) out.push(path);
  }
  return out;
}

const filters = process.argv.slice(2);
const files = collect('build/test').filter(
  (f) => filters.length === 0 || filters.some((x) => f.includes(x)),
);
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--test', '--test-reporter=spec', '--enable-source-maps', ...files],
  { stdio: 'inherit', env: process.env },
);
process.exit(result.status ?? 1);
