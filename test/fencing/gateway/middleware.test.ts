import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { fastify } from 'fastify';
import { createFenceMiddleware, fencingPlugin } from '../../../src/fencing/http/index.js';
import { SqliteMarkStore } from '../../../src/fencing/marks/sqlite.js';
import { Gate } from '../../support/gate.js';
import { tempDir } from '../../support/tmp.js';

const put = async (url: string, token: string, body: string) => {
  const r = await fetch(url, { method: 'PUT', headers: { 'fencing-token': token }, body });
  const text = await r.text();
  return { status: r.status, text, mark: r.headers.get('fencing-mark') };
};

describe('leasehold/fencing/http', () => {
  it('connect-style middleware on node:http: stale tokens never reach the handler; one scope runs one request at a time', async () => {
    const tmp = tempDir('mw');
    const marks = new SqliteMarkStore({ path: `${tmp.dir}/m.db` });
    const ran: string[] = [];
    const gate = new Gate();
    const mw = createFenceMiddleware({
      marks,
      scope: (req) => (req.url?.startsWith('/reports/') ? `report/${req.url.slice(9)}` : undefined),
    });
    const server = createServer((req, res) => {
      mw(req, res, (err) => {
        if (err) {
          res.statusCode = 500;
          return res.end();
        }
        const token = String(req.headers['fencing-token']);
        ran.push(token);
        void (token === '41' ? gate.wait() : Promise.resolve()).then(() => res.end(`ok ${token}`));
      });
    });
    let arrived = 0;
    let allArrived!: () => void;
    const three = new Promise<void>((r) => (allArrived = r));
    server.on('request', () => {
      if (++arrived === 3) allArrived();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/reports/july`;
    try {
      const first = put(url, '41', 'a');
      await gate.reached;
      // 42 arrives while 41's handler is still running: it waits for 41 to finish.
      const second = put(url, '42', 'b');
      const third = put(url, '41', 'c');
      await three;
      assert.deepEqual(ran, ['41'], '42 arrived but waits while 41 is in progress');
      gate.open();
      assert.equal((await first).status, 200);
      assert.equal((await second).status, 200);
      const stale = await third;
      assert.equal(stale.status, 409);
      assert.match(stale.text, /"code":"stale_fence"/);
      assert.equal(stale.mark, '42');
      assert.deepEqual(ran, ['41', '42'], 'the stale request never reached the handler');
      const bad = await put(url, '4x', 'd');
      assert.equal(bad.status, 400);
      assert.match(bad.text, /"code":"invalid_argument"/);
    } finally {
      gate.open();
      await new Promise((r) => server.close(r));
      await marks.close();
      tmp.remove();
    }
  });

  it('Fastify plugin: the same check before the handler', async () => {
    const tmp = tempDir('mw-f');
    const marks = new SqliteMarkStore({ path: `${tmp.dir}/m.db` });
    const app = fastify();
    const ran: string[] = [];
    await app.register(fencingPlugin, {
      marks,
      scope: (req) => `report/${(req.params as { id: string }).id}`,
    });
    app.put('/reports/:id', (req) => {
      ran.push(String(req.headers['fencing-token']));
      return { ok: true };
    });
    const url = `${await app.listen({ port: 0, host: '127.0.0.1' })}/reports/july`;
    try {
      assert.equal((await put(url, '42', 'x')).status, 200);
      const stale = await put(url, '41', 'y');
      assert.equal(stale.status, 409);
      assert.equal(stale.mark, '42');
      assert.deepEqual(ran, ['42']);
      assert.equal((await marks.read('report/july')).highWaterMark, 42n);
    } finally {
      await app.close();
      await marks.close();
      tmp.remove();
    }
  });
});
