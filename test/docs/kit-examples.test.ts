import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

// The third-party examples of docs/store-contract.md and docs/fence-contract.md — a store over
// a Map, a fence in front of a JSON file — run the kits of `leasehold/testing` with Node's test
// runner, importing the package by its name as a user's project would.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const HOOK = `${ROOT}build/test/support/self-import.js`;

function runExample(file: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, ['--import', HOOK, '--test', '--test-reporter=tap', file], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 240_000,
    // Without the runner's context, the child runs its own tests and reports them.
    env: { ...process.env, NODE_TEST_CONTEXT: undefined },
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** The count a TAP summary line reports (`# pass 23`). */
const count = (out: string, what: string) =>
  Number(new RegExp(`^# ${what} (\\d+)$`, 'm').exec(out)?.[1]);

describe('the kit examples', () => {
  it('examples/map-store: MapLeaseStore passes the store contract', { timeout: 300_000 }, () => {
    const r = runExample('build/examples/map-store/map-lease-store.test.js');
    assert.equal(r.status, 0, r.out);
    assert.equal(count(r.out, 'fail'), 0, r.out);
    assert.ok(count(r.out, 'pass') >= 15, r.out);
  });

  it(
    'examples/json-file-fence: JsonFileFence passes the fence contract',
    { timeout: 300_000 },
    () => {
      const r = runExample('build/examples/json-file-fence/json-file-fence.test.js');
      assert.equal(r.status, 0, r.out);
      assert.equal(count(r.out, 'fail'), 0, r.out);
      assert.equal(count(r.out, 'skipped'), 0, r.out);
      assert.ok(count(r.out, 'pass') >= 10, r.out);
    },
  );
});
