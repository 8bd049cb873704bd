import assert from 'node:assert/strict';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Agent, fetch as undiciFetch } from 'undici';
import { createGateway } from '../../../src/fencing/gateway/index.js';
import { startTestServer } from '../../support/lease-server.js';
import { selfSignedCert } from '../../support/tls.js';
import { tempDir } from '../../support/tmp.js';
import { startUpstream } from './support.js';

const ROUTES = [{ methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' }];

describe('gateway: TLS, bearer auth, decision reports', () => {
  it('serves HTTPS and forwards to an HTTPS upstream trusted through its CA', async () => {
    const tmp = tempDir('gw-tls');
    const { cert, key } = selfSignedCert(tmp.dir);
    const seen: string[] = [];
    const up = createServer({ cert, key }, (req, res) => {
      seen.push(`${req.method} ${req.url} ${String(req.headers['fencing-token'])}`);
      req.resume();
      req.on('end', () => res.end('secure'));
    });
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    const gw = await createGateway({
      upstream: `https://127.0.0.1:${(up.address() as AddressInfo).port}`,
      upstreamTls: { ca: cert },
      tls: { cert, key },
      routes: ROUTES,
      marks: `sqlite:${tmp.dir}/m.db`,
      port: 0,
      logLevel: 'silent',
    });
    const agent = new Agent({ connect: { ca: cert } });
    try {
      const url = await gw.listen();
      assert.match(url, /^https:/);
      const r = await undiciFetch(`${url}/reports/1`, {
        method: 'PUT',
        headers: { 'fencing-token': '3' },
        body: 'x',
        dispatcher: agent,
      });
      assert.equal(r.status, 200);
      assert.equal(await r.text(), 'secure');
      assert.deepEqual(seen, ['PUT /reports/1 3']);
    } finally {
      await agent.close();
      await gw.close();
      await new Promise((r) => up.close(r));
      tmp.remove();
    }
  });

  it('bearer tokens: 401 without one, 403 outside its prefixes, and the secret is never forwarded', async () => {
    const tmp = tempDir('gw-auth');
    const up = await startUpstream();
    const gw = await createGateway({
      upstream: up.url,
      routes: ROUTES,
      marks: `sqlite:${tmp.dir}/m.db`,
      port: 0,
      logLevel: 'silent',
      auth: {
        tokens: [
          { name: 'reports', token: 'reports-secret-0123456789', prefixes: ['report/'] },
          { name: 'other', token: 'other-secret-0123456789', prefixes: ['job/'] },
        ],
      },
    });
    try {
      const url = await gw.listen();
      const put = (auth?: string) =>
        fetch(`${url}/reports/1`, {
          method: 'PUT',
          headers: { 'fencing-token': '3', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
          body: 'x',
        });
      const none = await put();
      assert.equal(none.status, 401);
      assert.equal(
        ((await none.json()) as { error: { code: string } }).error.code,
        'unauthenticated',
      );
      const wrong = await put('other-secret-0123456789');
      assert.equal(wrong.status, 403);
      assert.equal(
        ((await wrong.json()) as { error: { code: string } }).error.code,
        'permission_denied',
      );
      assert.equal(up.count(), 0);
      assert.equal((await gw.marks.read('report/1')).highWaterMark, 0n);
      assert.equal((await put('reports-secret-0123456789')).status, 200);
      assert.equal(up.count(), 1);
      assert.equal(up.log[0]?.authorization, undefined, 'the bearer secret stayed at the gateway');
      const health = await fetch(`${url}/_leasehold/healthz`);
      assert.equal(health.status, 200, 'health needs no token');
    } finally {
      await gw.close();
      await up.close();
      tmp.remove();
    }
  });

  it('reports decisions to a leasehold server (its fence-decision metric counts the stale one)', async () => {
    const tmp = tempDir('gw-report');
    const up = await startUpstream();
    const server = await startTestServer();
    const gw = await createGateway({
      upstream: up.url,
      routes: ROUTES,
      marks: `sqlite:${tmp.dir}/m.db`,
      port: 0,
      logLevel: 'silent',
      report: { url: server.url, resource: 'reports-api' },
    });
    try {
      const url = await gw.listen();
      const put = (t: string) =>
        fetch(`${url}/reports/1`, { method: 'PUT', headers: { 'fencing-token': t }, body: 'x' });
      assert.equal((await put('42')).status, 200);
      assert.equal((await put('41')).status, 409);
      const stale = async (): Promise<number> => {
        const text = await (await fetch(`${server.url}/metrics`)).text();
        return Number(
          /^leasehold_fence_decisions_total\{[^}]*result="stale_fence"[^}]*\} (\d+)/m.exec(
            text,
          )?.[1] ?? 0,
        );
      };
      const end = Date.now() + 10_000;
      while ((await stale()) < 1) {
        assert.ok(Date.now() < end, 'the stale decision never reached the server');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await gw.close();
      await server.close();
      await up.close();
      tmp.remove();
    }
  });
});
