import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { tempDir } from '../support/tmp.js';

// The Python example (examples/python/fence_decision.py) decides as leasehold's fences do,
// checked against the same vector file the TypeScript fences are; and it notices a vector it
// does not meet, so its "all pass" means something.

const SCRIPT = 'examples/python/fence_decision.py';
const VECTORS = 'spec/fence-decision-vectors.json';

function run(...args: string[]) {
  return spawnSync('python3', [SCRIPT, ...args], { encoding: 'utf8', timeout: 60_000 });
}

describe('the fence decision in Python, against the test vectors', () => {
  it('passes every vector of spec/fence-decision-vectors.json', () => {
    const total = (JSON.parse(readFileSync(VECTORS, 'utf8')) as { vectors: unknown[] }).vectors
      .length;
    const r = run();
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`^${total}/${total} fence decision vectors pass$`, 'm'));
  });

  it('fails on a vector whose expected decision it does not give', () => {
    const tmp = tempDir('python-vectors');
    try {
      const file = JSON.parse(readFileSync(VECTORS, 'utf8')) as {
        vectors: { name: string; expect: { decision: string } }[];
      };
      const v = file.vectors.find((x) => x.expect.decision === 'stale_fence')!;
      v.expect.decision = 'applied';
      const path = join(tmp.dir, 'vectors.json');
      writeFileSync(path, JSON.stringify(file));
      const r = run(path);
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.ok(r.stdout.includes(`FAIL ${v.name}: decision`), r.stdout);
    } finally {
      tmp.remove();
    }
  });
});
