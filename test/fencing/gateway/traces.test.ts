import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { context, propagation, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { createGateway, type Gateway } from '../../../src/fencing/gateway/index.js';
import { eventually } from '../../support/time.js';
import { tempDir } from '../../support/tmp.js';
import { registerTraceSdk, traceparentOf } from '../../support/trace-sdk.js';

const sdk = registerTraceSdk();

describe('traces through the gateway: client → gateway → upstream', () => {
  const tmp = tempDir('gw-traces');
  /** The headers of each request the real upstream received. */
  const received: IncomingHttpHeaders[] = [];
  let upstream: Server;
  let gw: Gateway;
  let url: string;

  before(async () => {
    upstream = createServer((req, res) => {
      received.push(req.headers);
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    gw = await createGateway({
      upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      routes: [{ methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' }],
      marks: `sqlite:${tmp.dir}/marks.db`,
      port: 0,
      logLevel: 'silent',
    });
    url = await gw.listen();
  });
  after(async () => {
    await gw.close();
    await new Promise<void>((r) => upstream.close(() => r()));
    tmp.remove();
    await sdk.shutdown();
  });

  /** A request from inside the caller's span, with the `traceparent` its propagator writes. */
  async function send(path: string, method: string, extra: Record<string, string> = {}) {
    const headers: Record<string, string> = { ...extra };
    propagation.inject(context.active(), headers);
    assert.match(headers['traceparent'] ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      body: method === 'PUT' ? 'x' : undefined,
    });
    await res.text();
    return res.status;
  }

  it('the gateway span is a child of the caller span, and the upstream gets the gateway span as its parent', async () => {
    const root = await sdk.inRootSpan('app.write', async (span) => {
      assert.equal(await send('/reports/7?draft=1', 'PUT', { 'fencing-token': '5' }), 200);
      // A stale token: answered by the gateway itself, never forwarded.
      assert.equal(await send('/reports/7', 'PUT', { 'fencing-token': '4' }), 409);
      return span;
    });
    const spans = await eventually('both gateway spans', () => {
      const s = sdk.childrenOf(root).filter((x) => x.name === 'PUT /*');
      return s.length === 2 ? s : undefined;
    });
    const [forwarded, refused] = spans.sort(
      (a, b) =>
        Number(a.attributes['http.response.status_code']) -
        Number(b.attributes['http.response.status_code']),
    );
    assert.ok(forwarded !== undefined && refused !== undefined);
    assert.equal(forwarded.kind, SpanKind.SERVER);
    assert.equal(forwarded.spanContext().traceId, root.spanContext().traceId);
    assert.deepEqual(
      {
        method: forwarded.attributes['http.request.method'],
        route: forwarded.attributes['http.route'],
        path: forwarded.attributes['url.path'],
        status: forwarded.attributes['http.response.status_code'],
        address: forwarded.attributes['server.address'],
      },
      { method: 'PUT', route: '/*', path: '/reports/7', status: 200, address: '127.0.0.1' },
    );
    assert.equal(forwarded.status.code, SpanStatusCode.UNSET);
    assert.equal(refused.attributes['http.response.status_code'], 409);
    // The gateway's decision on each, with the scope and the token as decimal strings.
    assert.deepEqual(
      [forwarded, refused].map((s) => [
        s.attributes['leasehold.scope'],
        s.attributes['leasehold.token'],
        s.attributes['leasehold.result'],
        s.attributes['leasehold.high_water_mark'],
      ]),
      [
        ['report/7', '5', 'applied', undefined],
        ['report/7', '4', 'stale_fence', '5'],
      ],
    );

    // Exactly one request reached the upstream, carrying the gateway's span, not the caller's.
    assert.equal(received.length, 1);
    assert.equal(received[0]?.['traceparent'], traceparentOf(forwarded));
    assert.notEqual(received[0]?.['traceparent'], traceparentOf(root));
  });

  it('a request without traceparent starts a trace at the gateway, which the upstream continues', async () => {
    received.length = 0;
    const before = sdk.named('PUT /*').length;
    const res = await fetch(`${url}/reports/8`, {
      method: 'PUT',
      headers: { 'fencing-token': '1' },
      body: 'y',
    });
    assert.equal(res.status, 200);
    await res.text();
    const own = await eventually('the gateway span', () =>
      sdk.named('PUT /*').length > before ? sdk.named('PUT /*').at(-1) : undefined,
    );
    assert.equal(own.parentSpanContext, undefined);
    assert.equal(received.length, 1);
    assert.equal(received[0]?.['traceparent'], traceparentOf(own));
  });
});
