import assert from 'node:assert/strict';
import { uniqueKey } from '../../kit/wait.js';
import { applied, has, policiesOf, stale, withFences } from '../helpers.js';
import type { FenceContractCase } from '../harness.js';

/** The fence contract: marks that survive a re-open, and idempotency keys. */
export const durabilityCases: FenceContractCase[] = [
  {
    name: 'the mark is durable: after the fence is closed and opened again, a token below the accepted one is refused',
    async run(h) {
      const scope = uniqueKey('fence-durable');
      await withFences(h, '>=', 1, async ([f]) => {
        applied(await f!.write(scope, 10n, '10:a'), 'write at 10');
        applied(await f!.write(scope, 12n, '12:a'), 'write at 12');
      });
      await h.restart?.();
      await withFences(h, '>=', 1, async ([f]) => {
        stale(await f!.write(scope, 11n, '11:late'), 12n, 'write at 11 after the re-open');
        applied(await f!.write(scope, 12n, '12:b'), 'write at 12 after the re-open');
        assert.deepEqual(await f!.accepted(scope), ['10:a', '12:a', '12:b']);
      });
    },
  },
  {
    name: 'idempotency keys: a retry of (token, key) answers duplicate and writes nothing again; another key, or the key under a newer token, writes',
    async run(h, t) {
      if (!has(h, 'idempotency', t)) return;
      await withFences(h, '>=', 2, async ([a, b]) => {
        const scope = uniqueKey('fence-idem');
        applied(await a!.write(scope, 42n, '42:one', { idempotencyKey: 'op-1' }), 'first try');
        const retry = await b!.write(scope, 42n, '42:one again', { idempotencyKey: 'op-1' });
        assert.equal(retry.status, 'duplicate', `the retry: got ${retry.status}`);
        applied(await a!.write(scope, 42n, '42:two', { idempotencyKey: 'op-2' }), 'another key');
        applied(
          await a!.write(scope, 43n, '43:one', { idempotencyKey: 'op-1' }),
          'the key under a newer token',
        );
        stale(
          await b!.write(scope, 42n, '42:three', { idempotencyKey: 'op-3' }),
          43n,
          'a new key under the older token',
        );
        assert.deepEqual(await a!.accepted(scope), ['42:one', '42:two', '43:one']);
      });
    },
  },
  {
    name: 'a retried key below the mark answers stale_fence, even though it was applied before; at the mark it is a duplicate (each policy)',
    async run(h, t) {
      if (!has(h, 'idempotency', t) || !has(h, 'stale before duplicate', t)) return;
      for (const policy of policiesOf(h)) {
        await withFences(h, policy, 2, async ([a, b]) => {
          const scope = uniqueKey('fence-idem-old');
          const what = `policy '${policy}'`;
          applied(await a!.write(scope, 42n, '42:one', { idempotencyKey: 'op-1' }), `${what}: 42`);
          const retry = await a!.write(scope, 42n, '42:one again', { idempotencyKey: 'op-1' });
          assert.equal(
            retry.status,
            'duplicate',
            `${what}: the retry at the mark: got ${retry.status}`,
          );
          applied(await b!.write(scope, 43n, '43:B'), `${what}: a newer writer`);
          // The retrying writer must learn it lost, whether or not the fence still keeps
          // its key: every fence answers the same.
          stale(
            await a!.write(scope, 42n, '42:one late', { idempotencyKey: 'op-1' }),
            43n,
            `${what}: the retry after 43 wrote`,
          );
          assert.deepEqual(await b!.accepted(scope), ['42:one', '43:B']);
        });
      }
    },
  },
];
