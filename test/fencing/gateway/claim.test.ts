import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { createGateway, type Gateway } from '../../../src/fencing/gateway/index.js';
import { GatewayClaimClient } from '../../../src/fencing/http/index.js';
import { Gate } from '../../support/gate.js';
import { tempDir } from '../../support/tmp.js';
import { MARK_BACKENDS, type MarksUnderTest } from './marks-env.js';
import { startUpstream, type Upstream } from './support.js';

// The gateway's claim call, POST /_leasehold/claim (claim before start, DESIGN §4, I9), and
// GatewayClaimClient: a claim reaches no upstream, refuses every lower token from then on
// (on every backend of the marks), leaves a '>' route its first write, waits for the scope's
// forward in progress, is checked and authorised like a fenced request.

const ROUTES = [
  { methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' },
  { methods: ['POST'], path: '/once/:id', scope: 'report/{id}', policy: '>' as const },
];

const claimBody = (scope: unknown, token: unknown): string => JSON.stringify({ scope, token });

for (const backend of MARK_BACKENDS) {
  describe(`gateway claim (${backend.name} marks)`, () => {
    let up: Upstream;
    let marks: MarksUnderTest;
    let gw: Gateway;
    let url: string;
    before(async () => {
      up = await startUpstream();
      marks = await backend.open();
      gw = await createGateway({
        upstream: up.url,
        routes: ROUTES,
        marks: marks.marks,
        port: 0,
        logLevel: 'silent',
      });
      url = await gw.listen();
    });
    after(async () => {
      await gw.close();
      await up.close();
      await marks.dispose();
    });

    const claim = (body: string) =>
      fetch(`${url}/_leasehold/claim`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
    const put = (path: string, token: string, method = 'PUT') =>
      fetch(`${url}${path}`, { method, headers: { 'fencing-token': token }, body: token });

    it('applied: nothing reaches the upstream, and token 41 is refused before 42 has written', async () => {
      assert.equal((await put('/reports/a', '41')).status, 200);
      const before = up.count();
      const r = await claim(claimBody('report/a', '42'));
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { status: 'applied', scope: 'report/a', token: '42' });
      assert.equal(up.count(), before, 'a claim never reaches the upstream');
      const stale = await put('/reports/a', '41');
      assert.equal(stale.status, 409);
      assert.equal(stale.headers.get('fencing-mark'), '42');
      assert.equal(((await stale.json()) as { error: { code: string } }).error.code, 'stale_fence');
      assert.equal(up.count(), before);
      assert.equal((await claim(claimBody('report/a', '42'))).status, 200, 'idempotent');
      assert.equal((await put('/reports/a', '42')).status, 200);
    });

    it("a '>' route still lets the claimed token's first request through, and only that one", async () => {
      assert.equal((await claim(claimBody('report/b', '7'))).status, 200);
      assert.equal((await put('/once/b', '6', 'POST')).status, 409);
      assert.equal((await put('/once/b', '7', 'POST')).status, 200);
      assert.equal((await put('/once/b', '7', 'POST')).status, 409);
    });

    it("follows the route's policy: by default the strictest route of the scope, or the one named", async () => {
      assert.equal((await put('/once/e', '7', 'POST')).status, 200);
      // A '>' route gives report/{id}: token 7's one write is spent, so its claim is stale.
      const spent = await claim(claimBody('report/e', '7'));
      assert.equal(spent.status, 409);
      assert.equal(spent.headers.get('fencing-mark'), '7');
      const named = (route: string) =>
        claim(JSON.stringify({ scope: 'report/e', token: '7', route }));
      assert.equal((await named('POST /once/:id')).status, 409, "the '>' route named");
      // The '>=' route would still let token 7 write: its claim is applied.
      assert.equal((await named('PUT /reports/:id')).status, 200, "the '>=' route named");
      const unknown = await named('no such route');
      assert.equal(unknown.status, 400);
      assert.equal(
        ((await unknown.json()) as { error: { code: string } }).error.code,
        'invalid_argument',
      );
      const viaClient = new GatewayClaimClient({ url, route: 'PUT /reports/:id' });
      assert.equal((await viaClient.claim('report/e', 7n)).status, 'applied');
      assert.equal(
        (await new GatewayClaimClient({ url }).claim('report/e', 7n)).status,
        'stale_fence',
      );
      assert.equal(up.count('/once/e'), 1, 'claims never reach the upstream');
    });

    it('stale: 409 stale_fence with Fencing-Mark, and nothing changed', async () => {
      assert.equal((await put('/reports/c', '50')).status, 200);
      const r = await claim(claimBody('report/c', '49'));
      assert.equal(r.status, 409);
      assert.equal(r.headers.get('fencing-mark'), '50');
      const body = (await r.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'stale_fence');
      assert.match(body.error.message, /below the scope's mark 50/);
      assert.equal((await gw.marks.read('report/c')).highWaterMark, 50n);
    });

    it('bad input: 400 invalid_argument in the error shape, nothing claimed', async () => {
      for (const body of [
        '',
        'not json',
        '[1]',
        claimBody('report/d', 42),
        claimBody('report/d', '007'),
        claimBody('report/d', '0'),
        claimBody('report/d', '9223372036854775808'),
        claimBody('', '42'),
        claimBody(undefined, '42'),
        claimBody('x'.repeat(2000), '42'),
      ]) {
        const r = await claim(body);
        assert.equal(r.status, 400, body.slice(0, 60));
        const e = (await r.json()) as { error: { code: string; message: string } };
        assert.equal(e.error.code, 'invalid_argument');
      }
      assert.equal((await gw.marks.read('report/d')).highWaterMark, 0n);
      const big = await claim(claimBody('report/d', '4'.repeat(5000)));
      assert.equal(big.status, 413);
    });

    it("waits for the scope's forward in progress: the claim answers after the upstream answered 41", async () => {
      const gate = new Gate();
      up.onRequest = (e) => (e.token === '41' ? gate.wait() : undefined);
      try {
        const order: string[] = [];
        const first = put('/reports/e', '41').then((r) => {
          order.push('41 answered');
          return r.status;
        });
        await gate.reached;
        const claimed = claim(claimBody('report/e', '42')).then((r) => {
          order.push('claim answered');
          return r.status;
        });
        // A negative check: a claim that did not wait would have answered within this time.
        await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(order, []);
        gate.open();
        assert.equal(await first, 200);
        assert.equal(await claimed, 200);
        assert.deepEqual(order, ['41 answered', 'claim answered']);
      } finally {
        gate.open();
        up.onRequest = undefined;
      }
    });

    it('GatewayClaimClient: applied, stale_fence with the mark, ERR_INVALID_ARGUMENT before sending', async () => {
      const client = new GatewayClaimClient({ url });
      assert.deepEqual(await client.claim('report/f', 42n), { status: 'applied' });
      assert.deepEqual(await client.claim('report/f', '41'), {
        status: 'stale_fence',
        highWaterMark: 42n,
      });
      await assert.rejects(client.claim('report/f', 0n), (e: unknown) =>
        isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
      );
      await assert.rejects(client.claim('', 5n), (e: unknown) =>
        isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
      );
      assert.equal((await put('/reports/f', '41')).status, 409);
    });
  });
}

describe('gateway claim: auth and reachability', () => {
  it('bearer auth: 401 without a token, 403 outside its prefixes or without verb fence; GatewayClaimClient throws ERR_INVALID_ARGUMENT for those', async () => {
    const tmp = tempDir('gw-claim-auth');
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
          { name: 'jobs', token: 'jobs-secret-0123456789', prefixes: ['job/'] },
          {
            name: 'reader',
            token: 'reader-secret-0123456789',
            prefixes: ['report/'],
            verbs: ['read'],
          },
        ],
      },
    });
    try {
      const url = await gw.listen();
      const post = (auth?: string) =>
        fetch(`${url}/_leasehold/claim`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(auth ? { authorization: `Bearer ${auth}` } : {}),
          },
          body: claimBody('report/1', '5'),
        });
      assert.equal((await post()).status, 401);
      assert.equal((await post('jobs-secret-0123456789')).status, 403);
      assert.equal((await post('reader-secret-0123456789')).status, 403);
      assert.equal((await gw.marks.read('report/1')).highWaterMark, 0n);
      assert.equal((await post('reports-secret-0123456789')).status, 200);
      assert.equal((await gw.marks.read('report/1')).highWaterMark, 5n);
      const denied = new GatewayClaimClient({ url, apiToken: 'jobs-secret-0123456789' });
      await assert.rejects(denied.claim('report/1', 6n), (e: unknown) =>
        isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
      );
      const allowed = new GatewayClaimClient({ url, apiToken: 'reports-secret-0123456789' });
      assert.deepEqual(await allowed.claim('report/1', 6n), { status: 'applied' });
      assert.equal(up.count(), 0);
    } finally {
      await gw.close();
      await up.close();
      tmp.remove();
    }
  });

  it('GatewayClaimClient: an unreachable gateway throws ERR_UNAVAILABLE; bad options throw ERR_INVALID_ARGUMENT', async () => {
    const client = new GatewayClaimClient({ url: 'http://127.0.0.1:1', timeout: '2s' });
    await assert.rejects(client.claim('report/1', 5n), (e: unknown) =>
      isLeaseholdError(e, 'ERR_UNAVAILABLE'),
    );
    for (const bad of [{ url: 'ftp://x' }, { url: 'nope' }, { url: 'http://x', timeout: 0 }])
      assert.throws(
        () => new GatewayClaimClient(bad),
        (e: unknown) => isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
      );
  });
});
