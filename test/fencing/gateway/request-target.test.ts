import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createGateway, type Gateway } from '../../../src/fencing/gateway/index.js';
import { rawRequest } from '../../support/raw-http.js';
import { tempDir } from '../../support/tmp.js';

/** One request as the upstream's own parser received it. */
interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

const ROUTES = [{ methods: ['PUT', 'POST'], path: '/reports/:id', scope: 'report/{id}' }];

function put(target: string, token: string, extra = ''): string {
  return (
    `PUT ${target} HTTP/1.1\r\nHost: gw\r\nFencing-Token: ${token}\r\n${extra}` +
    'Content-Length: 1\r\nConnection: close\r\n\r\nA'
  );
}

describe('gateway: one canonical request target decides route, scope and what is forwarded', () => {
  const tmp = tempDir('gw-target');
  const seen: Seen[] = [];
  let upstream: Server;
  let gw: Gateway;
  let url: string;

  before(async () => {
    upstream = createServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => {
        // Hop-by-hop fields of the answer, which must stay on this connection.
        res.setHeader('connection', 'keep-alive, x-upstream-hop');
        res.setHeader('x-upstream-hop', 'secret');
        res.setHeader('keep-alive', 'timeout=99');
        res.setHeader('proxy-authenticate', 'Basic realm="up"');
        res.setHeader('x-kept', 'yes');
        res.end('ok');
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    gw = await createGateway({
      upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      routes: ROUTES,
      marks: `sqlite:${tmp.dir}/marks.db`,
      port: 0,
      logLevel: 'silent',
    });
    url = await gw.listen();
  });

  after(async () => {
    await gw.close();
    await new Promise((r) => upstream.close(r));
    tmp.remove();
  });

  it('refuses the path tricks that carried token 41 past mark 42 (backslash, dot segments, fragment)', async () => {
    const first = await rawRequest(url, put('/reports/july', '42'));
    assert.equal(first.status, 200);
    const tricks: Array<[string, string]> = [
      ['/reports/x\\..\\july', 'backslash'],
      ['/reports/july#f', 'fragment'],
      ['/reports/july\\', 'backslash'],
      ['/reports/x/../july', 'dot_segment'],
      ['/reports/./july', 'dot_segment'],
      ['/reports/x%2F..%2Fjuly', 'encoded_separator'],
      ['/reports/%2e%2e/july', 'encoded_separator'],
      ['/reports//july', 'empty_segment'],
      ['/reports/jul%79', 'encoded_unreserved'],
      ['/r%65ports/july', 'encoded_unreserved'],
      ['/reports/july;x=1', 'path_parameter'],
      ['http://127.0.0.1/reports/july', 'not_origin_form'],
      ['/reports/july%00', 'encoded_separator'],
      ['/reports/jul%C3', 'bad_percent_encoding'],
    ];
    for (const [target, rule] of tricks) {
      const r = await rawRequest(url, put(target, '41'));
      assert.equal(r.status, 400, `${target}: ${r.body}`);
      const body = JSON.parse(r.body) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'invalid_argument', target);
      assert.match(body.error.message, new RegExp(`\\(${rule}\\)`), target);
    }
    // Only token 42's write ever reached the upstream.
    assert.deepEqual(
      seen.filter((s) => s.method === 'PUT').map((s) => [s.url, s.headers['fencing-token']]),
      [['/reports/july', '42']],
    );
    const metrics = await gw.metrics.registry.getSingleMetricAsString(
      'leasehold_gateway_refused_targets_total',
    );
    assert.match(metrics, /rule="backslash",marks="sqlite"} 2/);
    assert.match(metrics, /rule="encoded_separator",marks="sqlite"} 3/);
  });

  it("answers the router's own refusals in the error shape (invalid percent-encoding)", async () => {
    const r = await rawRequest(url, 'GET /x/%ZZ HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    assert.equal(r.status, 400);
    const body = JSON.parse(r.body) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'invalid_argument');
    assert.match(body.error.message, /bad_percent_encoding/);
    assert.doesNotMatch(r.body, /FST_ERR/);
  });

  it('forwards a canonical target byte for byte, query included', async () => {
    const target = "/reports/caf%C3%A9?ids[]=1&q=a|b{c}^`&x=%2F..%5C&y=';:@!$(*)+,";
    const before = seen.length;
    const r = await rawRequest(url, put(target, '7'));
    assert.equal(r.status, 200, r.body);
    assert.equal(seen.length, before + 1);
    assert.equal(seen.at(-1)?.url, target);
  });

  it('forwards no hop-by-hop header in either direction', async () => {
    const before = seen.length;
    const r = await rawRequest(
      url,
      put(
        '/reports/hop',
        '1',
        'Connection: x-client-hop\r\nX-Client-Hop: 1\r\nKeep-Alive: timeout=5\r\n' +
          'TE: trailers\r\nTrailer: X-T\r\nUpgrade: h2c\r\nProxy-Authorization: Basic eDp5\r\n' +
          'Proxy-Connection: keep-alive\r\nX-End-To-End: kept\r\n',
      ),
    );
    assert.equal(r.status, 200, r.body);
    const h = seen[before]?.headers;
    assert.ok(h !== undefined);
    for (const name of [
      'x-client-hop',
      'te',
      'trailer',
      'upgrade',
      'proxy-authorization',
      'proxy-connection',
    ])
      assert.equal(h[name], undefined, `${name} reached the upstream`);
    assert.notEqual(h['keep-alive'], 'timeout=5');
    assert.equal(h['x-end-to-end'], 'kept');
    // The answer: the upstream's connection fields stayed behind, the others came through.
    assert.equal(r.headers['x-upstream-hop'], undefined);
    assert.equal(r.headers['proxy-authenticate'], undefined);
    assert.notEqual(r.headers['keep-alive'], 'timeout=99');
    assert.equal(r.headers['x-kept'], 'yes');
  });

  it('refuses Transfer-Encoding with Content-Length before anything is forwarded', async () => {
    const before = seen.length;
    const r = await rawRequest(
      url,
      'PUT /reports/te HTTP/1.1\r\nHost: gw\r\nFencing-Token: 3\r\nContent-Length: 5\r\n' +
        'Transfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n',
    );
    assert.equal(r.status, 400);
    assert.equal(
      (JSON.parse(r.body) as { error: { code: string } }).error.code,
      'invalid_argument',
    );
    assert.equal(seen.length, before);
  });

  it("honours a client's Connection: close (the connection ends after the answer)", async () => {
    const u = new URL(url);
    const socket = connect(Number(u.port), u.hostname);
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    const ended = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 10_000);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    socket.write('GET /reports/x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    assert.equal(await ended, true, 'the gateway kept the connection open');
    assert.match(received, /^HTTP\/1\.1 200/);
    assert.match(received, /\r\nconnection: close\r\n/i);
  });
});
