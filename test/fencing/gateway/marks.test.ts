import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SqliteMarkStore } from '../../../src/fencing/marks/sqlite.js';
import { tempDir } from '../../support/tmp.js';
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
          headers: { 'content-type': 'text/plain', location: '/r/7' },
          body: Buffer.from('hi'),
        });
        const a = await marks.answer('s', 7n, 'op-1');
        assert.equal(a?.state, 'answered');
        assert.deepEqual(a?.state === 'answered' && a.headers, {
          'content-type': 'text/plain',
          location: '/r/7',
        });
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

describe('the current token costs no mark write', () => {
  it('SQLite: a stream of same-token checks leaves the write-ahead log as it was', async () => {
    const { statSync } = await import('node:fs');
    const { SqliteMarkStore } = await import('../../../src/fencing/marks/sqlite.js');
    const { tempDir } = await import('../../support/tmp.js');
    const tmp = tempDir('gw-nowrite');
    const marks = new SqliteMarkStore({ path: `${tmp.dir}/m.db` });
    try {
      const base = { scope: 's', policy: '>=' as const };
      await marks.check({ ...base, token: 1n });
      await marks.check({ ...base, token: 2n });
      const wal = statSync(`${tmp.dir}/m.db-wal`).size;
      for (let i = 0; i < 50; i++)
        assert.equal((await marks.check({ ...base, token: 2n })).status, 'applied');
      assert.equal(statSync(`${tmp.dir}/m.db-wal`).size, wal, 'no transaction was written');
      await marks.check({ ...base, token: 3n });
      assert.ok(
        statSync(`${tmp.dir}/m.db-wal`).size > wal,
        'a new token does write (the check is sensitive)',
      );
    } finally {
      await marks.close();
      tmp.remove();
    }
  });

  it('gateway: mark writes are counted only for new tokens', async () => {
    const { createGateway } = await import('../../../src/fencing/gateway/index.js');
    const { startUpstream } = await import('./support.js');
    const { tempDir } = await import('../../support/tmp.js');
    const tmp = tempDir('gw-nowrite2');
    const up = await startUpstream();
    const gw = await createGateway({
      upstream: up.url,
      routes: [{ methods: ['PUT'], path: '/r/:id', scope: 'r/{id}' }],
      marks: `sqlite:${tmp.dir}/m.db`,
      port: 0,
      logLevel: 'silent',
    });
    try {
      const url = await gw.listen();
      for (const t of ['5', '5', '5', '5', '6', '6', '6']) {
        const r = await fetch(`${url}/r/1`, {
          method: 'PUT',
          headers: { 'fencing-token': t },
          body: 'x',
        });
        assert.equal(r.status, 200);
      }
      const text = await gw.metrics.registry.getSingleMetricAsString(
        'leasehold_gateway_mark_writes_total',
      );
      assert.match(text, /leasehold_gateway_mark_writes_total\{[^}]*\} 2$/m);
      assert.equal(up.count(), 7);
    } finally {
      await gw.close();
      await up.close();
      tmp.remove();
    }
  });
});

describe('SQLite marks kept in memory', () => {
  it('are used only with exclusive: another opener of a shared file moves the mark, and the stale token is refused', async () => {
    const tmp = tempDir('gw-marks-shared');
    const path = `${tmp.dir}/m.db`;
    const one = new SqliteMarkStore({ path, exclusive: false });
    const two = new SqliteMarkStore({ path, exclusive: false });
    try {
      const base = { scope: 's', policy: '>=' as const };
      assert.equal((await one.check({ ...base, token: 5n })).status, 'applied');
      assert.equal((await one.check({ ...base, token: 5n })).status, 'applied');
      // Behind `one`'s back, as another process would.
      assert.equal((await two.check({ ...base, token: 7n })).status, 'applied');
      assert.deepEqual(await one.check({ ...base, token: 5n }), {
        status: 'stale_fence',
        highWaterMark: 7n,
      });
      assert.equal((await one.read('s')).highWaterMark, 7n);
    } finally {
      await one.close();
      await two.close();
      tmp.remove();
    }
  });

  it('with exclusive (the default), a mark committed by this store is what the next check sees', async () => {
    const tmp = tempDir('gw-marks-excl');
    const marks = new SqliteMarkStore({ path: `${tmp.dir}/m.db` });
    try {
      const base = { scope: 's', policy: '>' as const };
      assert.equal((await marks.check({ ...base, token: 5n })).status, 'applied');
      // `>`: the same token again is stale, decided from the kept mark.
      assert.deepEqual(await marks.check({ ...base, token: 5n }), {
        status: 'stale_fence',
        highWaterMark: 5n,
      });
      // A refused version check changes nothing, kept mark included.
      assert.equal(
        (await marks.check({ scope: 's', policy: '>=', token: 9n, expectedVersion: 3n })).status,
        'version_mismatch',
      );
      assert.equal((await marks.read('s')).highWaterMark, 5n);
      assert.equal((await marks.check({ ...base, token: 6n })).status, 'applied');
      assert.equal((await marks.read('s')).highWaterMark, 6n);
    } finally {
      await marks.close();
      tmp.remove();
    }
  });
});
