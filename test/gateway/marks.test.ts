import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MARK_BACKENDS } from './marks-env.js';

for (const backend of MARK_BACKENDS) {
  describe(`mark store (${backend.name})`, () => {
    it('advances on a higher token, refuses a lower one, and the current token again writes nothing', async () => {
      const { marks, dispose } = await backend.open();
      try {
        const base = { scope: 'report/july', policy: '>=' as const };
        assert.deepEqual(await marks.check({ ...base, token: 41n }), {
          status: 'applied',
          wrote: true,
          version: undefined,
        });
        assert.deepEqual(await marks.check({ ...base, token: 42n }), {
          status: 'applied',
          wrote: true,
          version: undefined,
        });
        assert.deepEqual(await marks.check({ ...base, token: 42n }), {
          status: 'applied',
          wrote: false,
          version: undefined,
        });
        assert.deepEqual(await marks.check({ ...base, token: 41n }), {
          status: 'stale_fence',
          highWaterMark: 42n,
        });
        assert.deepEqual(await marks.check({ scope: 'report/july', policy: '>', token: 42n }), {
          status: 'stale_fence',
          highWaterMark: 42n,
        });
        assert.equal((await marks.read('report/july')).highWaterMark, 42n);
        // Tokens past 2^53 compare exactly.
        const big = 9_223_372_036_854_775_807n;
        assert.equal((await marks.check({ ...base, token: big - 1n })).status, 'applied');
        assert.deepEqual(await marks.check({ ...base, token: big - 2n }), {
          status: 'stale_fence',
          highWaterMark: big - 1n,
        });
        assert.equal((await marks.check({ ...base, token: big })).status, 'applied');
      } finally {
        await dispose();
      }
    });

    it('an idempotency key is a duplicate under the same token; a version mismatch changes nothing', async () => {
      const { marks, dispose } = await backend.open();
      try {
        const req = { scope: 's', policy: '>=' as const, token: 7n, idempotencyKey: 'op-1' };
        assert.equal((await marks.check(req)).status, 'applied');
        assert.deepEqual(await marks.answer('s', 7n, 'op-1'), { state: 'pending' });
        assert.deepEqual(await marks.check(req), { status: 'duplicate' });
        await marks.saveAnswer('s', 7n, 'op-1', {
          state: 'answered',
          status: 201,
          contentType: 'text/plain',
          body: Buffer.from('hi'),
        });
        const a = await marks.answer('s', 7n, 'op-1');
        assert.equal(a?.state, 'answered');
        assert.equal(a?.state === 'answered' && a.body?.toString(), 'hi');
        const v = { scope: 's', policy: '>=' as const, token: 8n };
        assert.deepEqual(await marks.check({ ...v, expectedVersion: 1n }), {
          status: 'version_mismatch',
          version: 0n,
        });
        assert.equal(
          (await marks.read('s')).highWaterMark,
          7n,
          'the refused check did not advance the mark',
        );
        assert.deepEqual(await marks.check({ ...v, expectedVersion: 0n }), {
          status: 'applied',
          wrote: true,
          version: 1n,
        });
        assert.deepEqual(await marks.check({ ...v, expectedVersion: 0n }), {
          status: 'version_mismatch',
          version: 1n,
        });
        assert.deepEqual(await marks.read('s'), { highWaterMark: 8n, version: 1n });
      } finally {
        await dispose();
      }
    });
  });
}
