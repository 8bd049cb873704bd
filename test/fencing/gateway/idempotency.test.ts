import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createGateway } from '../../../src/fencing/gateway/index.js';
import { Gate } from '../../support/gate.js';
import { freePort } from '../../support/ports.js';
import { MARK_BACKENDS } from './marks-env.js';
import { startUpstream } from './support.js';

const ROUTES = [{ methods: ['PUT', 'POST'], path: '/reports/:id', scope: 'report/{id}' }];

async function call(url: string, headers: Record<string, string>, body = 'x') {
  const r = await fetch(url, { method: 'PUT', headers, body });
  const text = await r.text();
  return {
    status: r.status,
    text,
    code:
      r.status >= 400 ? (JSON.parse(text) as { error: { code: string } }).error.code : undefined,
    replayed: r.headers.get('idempotent-replayed'),
    version: r.headers.get('fencing-version'),
  };
}

for (const backend of MARK_BACKENDS) {
  describe(`gateway idempotency and expected versions (${backend.name} marks)`, () => {
    it(
      'a retried key gets the original answer and the upstream is called once; another token is a new call',
      { timeout: 30_000 },
      async () => {
        const { marks, dispose } = await backend.open();
        const up = await startUpstream();
        const gw = await createGateway({
          upstream: up.url,
          routes: ROUTES,
          marks,
          port: 0,
          logLevel: 'silent',
        });
        try {
          const u = `${await gw.listen()}/reports/1`;
          const first = await call(u, { 'fencing-token': '42', 'idempotency-key': 'publish-1' });
          assert.equal(first.status, 200);
          const again = await call(u, { 'fencing-token': '42', 'idempotency-key': 'publish-1' });
          assert.equal(again.status, 200);
          assert.equal(again.text, first.text, 'the original answer, replayed');
          assert.equal(again.replayed, 'true');
          assert.equal(up.count(), 1, 'never a second upstream call');
          const other = await call(u, { 'fencing-token': '42', 'idempotency-key': 'publish-2' });
          assert.equal(other.status, 200);
          assert.equal(up.count(), 2);
          // The same key under a newer token is a new operation of a new generation.
          assert.equal(
            (await call(u, { 'fencing-token': '43', 'idempotency-key': 'publish-1' })).status,
            200,
          );
          assert.equal(up.count(), 3);
          // And under the older token again: stale, not a replay.
          const old = await call(u, { 'fencing-token': '42', 'idempotency-key': 'publish-3' });
          assert.equal(old.code, 'stale_fence');
          assert.equal(up.count(), 3);
        } finally {
          await gw.close();
          await up.close();
          await dispose();
        }
      },
    );

    it(
      'a key whose forward timed out answers duplicate and is never sent again; one that never left is retried once',
      { timeout: 30_000 },
      async () => {
        const { marks, dispose } = await backend.open();
        const up = await startUpstream();
        const gate = new Gate();
        up.onRequest = (e) => (e.body === 'slow' ? gate.wait() : undefined);
        const gw = await createGateway({
          upstream: up.url,
          routes: ROUTES,
          marks,
          port: 0,
          logLevel: 'silent',
          upstreamTimeoutMs: 300,
        });
        const downPort = await freePort();
        const gwDown = await createGateway({
          upstream: `http://127.0.0.1:${downPort}`,
          routes: ROUTES,
          marks,
          port: 0,
          logLevel: 'silent',
        });
        let late: Awaited<ReturnType<typeof startUpstream>> | undefined;
        try {
          const u = `${await gw.listen()}/reports/2`;
          const t = await call(u, { 'fencing-token': '7', 'idempotency-key': 'k-slow' }, 'slow');
          assert.equal(t.status, 504);
          assert.equal(t.code, 'gateway_timeout');
          const retry = await call(
            u,
            { 'fencing-token': '7', 'idempotency-key': 'k-slow' },
            'slow',
          );
          assert.equal(retry.code, 'duplicate');
          assert.equal(up.count('/reports/2'), 1, 'the upstream got it once, and only once');
          gate.open();

          // Upstream down: refused connection, so the request never left.
          const d = `${await gwDown.listen()}/reports/3`;
          const down = await call(d, { 'fencing-token': '7', 'idempotency-key': 'k-down' });
          assert.equal(down.status, 502);
          assert.equal(down.code, 'bad_gateway');
          assert.equal(
            (await marks.read('report/3')).highWaterMark,
            7n,
            'the mark stays where it was accepted',
          );
          late = await startUpstream(downPort);
          const ok = await call(d, { 'fencing-token': '7', 'idempotency-key': 'k-down' });
          assert.equal(ok.status, 200);
          const replay = await call(d, { 'fencing-token': '7', 'idempotency-key': 'k-down' });
          assert.equal(replay.replayed, 'true');
          assert.equal(late.count('/reports/3'), 1);
        } finally {
          gate.open();
          await gw.close();
          await gwDown.close();
          await up.close();
          await late?.close();
          await dispose();
        }
      },
    );

    it(
      'expected versions: a reordered same-token request is refused and cannot move the scope backward',
      { timeout: 30_000 },
      async () => {
        const { marks, dispose } = await backend.open();
        const up = await startUpstream();
        const gw = await createGateway({
          upstream: up.url,
          routes: ROUTES,
          marks,
          port: 0,
          logLevel: 'silent',
        });
        try {
          const u = `${await gw.listen()}/reports/4`;
          // Two publishes under token 42, meant as version 0 → 1 → 2, arrive in the wrong order.
          const second = await call(
            u,
            { 'fencing-token': '42', 'fencing-expected-version': '1' },
            'v2',
          );
          assert.equal(second.code, 'version_mismatch');
          assert.equal(second.version, '0');
          assert.equal(up.count(), 0);
          const first = await call(
            u,
            { 'fencing-token': '42', 'fencing-expected-version': '0' },
            'v1',
          );
          assert.equal(first.status, 200);
          assert.equal(first.version, '1');
          const retried = await call(
            u,
            { 'fencing-token': '42', 'fencing-expected-version': '1' },
            'v2',
          );
          assert.equal(retried.status, 200);
          assert.equal(retried.version, '2');
          // The first one delivered again late: refused, the upstream keeps v2.
          const lateFirst = await call(
            u,
            { 'fencing-token': '42', 'fencing-expected-version': '0' },
            'v1',
          );
          assert.equal(lateFirst.code, 'version_mismatch');
          assert.deepEqual(
            up.log.map((e) => e.body),
            ['v1', 'v2'],
          );
          assert.deepEqual(await marks.read('report/4'), { highWaterMark: 42n, version: 2n });
        } finally {
          await gw.close();
          await up.close();
          await dispose();
        }
      },
    );
  });
}
