// Runs leasehold's fence contract against JsonFileFence with Node's test runner:
//   node --test json-file-fence.test.js
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fenceContract } from 'leasehold/testing';
import { JsonFileFence } from './json-file-fence.js';

const dir = mkdtempSync(join(tmpdir(), 'json-file-fence-'));
const path = join(dir, 'resource.json');

fenceContract({
  name: 'json-file',
  // Every open() is a new instance over the same file, as a restarted writer would be.
  open(policy) {
    const fence = new JsonFileFence(path, policy);
    return {
      write: (scope, token, value, o) =>
        Promise.resolve(fence.write(scope, token, value, o?.idempotencyKey)),
      claim: (scope, token) => fence.claim(scope, token),
      accepted: (scope) => Promise.resolve(fence.data(scope)),
      close: () => undefined,
    };
  },
  teardown: () => rmSync(dir, { recursive: true, force: true }),
});
