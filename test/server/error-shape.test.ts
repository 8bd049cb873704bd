import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { ERROR_BODY } from '../../src/server/answer-schemas.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { rawRequest, type RawAnswer } from '../support/raw-http.js';

const isErrorBody = new Ajv({ strict: false }).compile(ERROR_BODY);

/** Asserts `a` is `status` with the documented error body and `code`; returns the message. */
function assertError(a: RawAnswer, status: number, code: string): string {
  assert.equal(a.status, status, `status of ${a.body.slice(0, 300)}`);
  assert.match(a.headers['content-type'] ?? '', /^application\/json/, 'a JSON body');
  const body = JSON.parse(a.body) as { error: { code: string; message: string } };
  assert.ok(isErrorBody(body), `the error shape: ${a.body.slice(0, 300)}`);
  assert.equal(body.error.code, code, a.body.slice(0, 300));
  return body.error.message;
}

const get = (path: string, extra = ''): string =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}Connection: close\r\n\r\n`;

describe('every answer of the server has the documented shape, router and framing errors too', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t?.close();
  });

  it('answers a badly percent-encoded path 400 invalid_argument', async () => {
    const msg = assertError(
      await rawRequest(t.url, get('/v1/leases/%E0%A4%A')),
      400,
      'invalid_argument',
    );
    assert.match(msg, /percent-encod/);
    assertError(await rawRequest(t.url, get('/v1/elections/%E0%A4%A')), 400, 'invalid_argument');
  });

  it('takes election names up to the 1 KiB key limit, and answers longer ones in the error shape', async () => {
    const observed = await rawRequest(t.url, get(`/v1/elections/${'a'.repeat(150)}`));
    assert.equal(observed.status, 200, observed.body);
    // election/ + 1015 bytes = a 1024-byte key: the longest accepted.
    const longest = 'n'.repeat(1024 - 'election/'.length);
    const body = JSON.stringify({ ttl: '10s' });
    const elected = await rawRequest(
      t.url,
      `POST /v1/elections/${longest}/campaign HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    assert.equal(elected.status, 200, elected.body);
    assert.equal((JSON.parse(elected.body) as { key: string }).key, `election/${longest}`);
    // Percent-encoded multi-byte names of up to 1 KiB pass the router too (3 characters a byte).
    const encoded = encodeURIComponent('é'.repeat(500));
    assert.equal((await rawRequest(t.url, get(`/v1/elections/${encoded}`))).status, 200);
    assertError(await rawRequest(t.url, get(`/v1/elections/${longest}n`)), 400, 'invalid_argument');
    assertError(
      await rawRequest(t.url, get(`/v1/elections/${'n'.repeat(5000)}`)),
      414,
      'uri_too_long',
    );
  });

  it('answers 404 not_found to an unknown path and 405 method_not_allowed, with Allow, to a known one', async () => {
    assertError(await rawRequest(t.url, get('/nothing/here')), 404, 'not_found');
    const del = await rawRequest(
      t.url,
      'DELETE /v1/acquire HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    assertError(del, 405, 'method_not_allowed');
    assert.equal(del.headers['allow'], 'POST');
    const post = await rawRequest(
      t.url,
      'POST /v1/leases/some/key HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    );
    assertError(post, 405, 'method_not_allowed');
    assert.equal(post.headers['allow'], 'GET, HEAD');
  });

  it('answers 413 payload_too_large to a body over the limit', async () => {
    const big = 'x'.repeat(20_000);
    assertError(
      await rawRequest(
        t.url,
        `POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\nConnection: close\r\n\r\n${big}`,
      ),
      413,
      'payload_too_large',
    );
  });

  it('answers malformed HTTP framing 400 invalid_argument', async () => {
    const framings = [
      'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      'HELLO\r\n\r\n',
      'POST /v1/acquire HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
      'POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    ];
    for (const raw of framings) {
      const msg = assertError(await rawRequest(t.url, raw), 400, 'invalid_argument');
      assert.match(msg, /malformed HTTP request/, JSON.stringify(raw));
    }
  });

  it('answers a request without Host 400 invalid_argument', async () => {
    const a = await rawRequest(t.url, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    assert.match(assertError(a, 400, 'invalid_argument'), /Host/);
  });

  it('answers oversized headers and an oversized request line 431 headers_too_large', async () => {
    assertError(
      await rawRequest(t.url, get('/healthz', `X-Big: ${'a'.repeat(20_000)}\r\n`)),
      431,
      'headers_too_large',
    );
    assertError(
      await rawRequest(t.url, get(`/v1/leases/${'a'.repeat(20_000)}`)),
      431,
      'headers_too_large',
    );
  });

  it('answers HEAD of the event stream at once with its headers (found by the fuzz test)', async () => {
    const a = await rawRequest(
      t.url,
      'HEAD /v1/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      5000,
    );
    assert.equal(a.status, 200);
    assert.match(a.headers['content-type'] ?? '', /^text\/event-stream/);
  });

  it('still serves after all of that', async () => {
    const a = await rawRequest(t.url, get('/healthz'));
    assert.equal(a.status, 200);
    assert.deepEqual(JSON.parse(a.body), { status: 'ok' });
  });

  it('answers a request that arrives while the server shuts down 503 unavailable', async () => {
    const other = await startTestServer();
    const closing = other.server.close();
    try {
      // Through Fastify's routing (inject): a new connection would be refused while closing.
      const a = await other.server.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(a.statusCode, 503);
      const body = JSON.parse(a.body) as { error: { code: string } };
      assert.ok(isErrorBody(body), a.body);
      assert.equal(body.error.code, 'unavailable');
    } finally {
      await closing;
      await other.close();
    }
  });
});
