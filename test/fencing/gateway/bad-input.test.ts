import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  createGateway,
  parseGatewayConfig,
  type Gateway,
} from '../../../src/fencing/gateway/index.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { spawnCli } from '../../support/cli.js';
import { tempDir } from '../../support/tmp.js';
import { startUpstream, type Upstream } from './support.js';

interface Answer {
  status: number;
  body: unknown;
}

function rawHttp(url: string, text: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => s.write(text));
    let out = '';
    s.on('data', (c: Buffer) => (out += c.toString('latin1')));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
}

describe('gateway: bad input never reaches the upstream and never moves the mark', () => {
  let upstream: Upstream;
  let gw: Gateway;
  let url: string;
  const tmp = tempDir('gw-bad');
  before(async () => {
    upstream = await startUpstream();
    gw = await createGateway({
      upstream: upstream.url,
      routes: [
        { methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' },
        { methods: ['POST'], path: '/jobs/:id', scope: 'job/{id}', scopeHeader: 'Fencing-Scope' },
        { methods: ['POST'], path: '/queue/*', scopeHeader: 'Fencing-Scope' },
      ],
      marks: `sqlite:${tmp.dir}/marks.db`,
      port: 0,
      logLevel: 'silent',
      maxBodyBytes: 1024,
    });
    url = await gw.listen();
    const ok = await fetch(`${url}/reports/1`, {
      method: 'PUT',
      headers: { 'fencing-token': '5' },
      body: 'x',
    });
    assert.equal(ok.status, 200);
  });
  after(async () => {
    await gw.close();
    await upstream.close();
    tmp.remove();
  });

  const expectRefused = async (
    answer: Answer,
    status: number,
    code: string,
    what: string,
  ): Promise<void> => {
    assert.equal(answer.status, status, what);
    const err = (answer.body as { error?: { code?: unknown; message?: unknown } }).error;
    assert.equal(err?.code, code, what);
    assert.equal(typeof err?.message, 'string', what);
    assert.equal(upstream.count(), 1, `${what}: nothing forwarded`);
    assert.equal((await gw.marks.read('report/1')).highWaterMark, 5n, `${what}: mark unchanged`);
  };
  const put = async (
    headers: Record<string, string>,
    path = '/reports/1',
    method = 'PUT',
  ): Promise<Answer> => {
    const r = await fetch(url + path, { method, headers, body: 'x' });
    return { status: r.status, body: await r.json() };
  };

  // Sent byte for byte over a raw socket (an HTTP client would refuse some). Spaces around a
  // header value are not part of it in HTTP (" 5" is "5"), so they are not bad input here.
  const BAD_TOKENS = [
    '',
    '007',
    '0',
    '-5',
    '+5',
    '5 6',
    '1e3',
    '0x10',
    '12abc',
    '٣',
    '5.0',
    '9223372036854775808',
    '99999999999999999999',
    'null',
    '[1]',
  ];
  for (const t of BAD_TOKENS) {
    it(`refuses token ${JSON.stringify(t)} with 400 invalid_argument`, async () => {
      const raw = await rawHttp(
        url,
        `PUT /reports/1 HTTP/1.1\r\nHost: x\r\nFencing-Token: ${t}\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx`,
      );
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1]);
      const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as unknown;
      await expectRefused({ status, body }, 400, 'invalid_argument', `token ${JSON.stringify(t)}`);
    });
  }

  it('refuses a missing token, a repeated token header, a bad idempotency key and a bad expected version', async () => {
    await expectRefused(await put({}), 400, 'invalid_argument', 'missing token');
    const twice = await rawHttp(
      url,
      'PUT /reports/1 HTTP/1.1\r\nHost: x\r\nFencing-Token: 9\r\nFencing-Token: 6\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    );
    assert.match(twice, /^HTTP\/1\.1 400/);
    assert.match(twice, /"code":"invalid_argument"/);
    await expectRefused(
      await put({ 'fencing-token': '9', 'idempotency-key': 'has space' }),
      400,
      'invalid_argument',
      'bad key',
    );
    await expectRefused(
      await put({ 'fencing-token': '9', 'fencing-expected-version': '-1' }),
      400,
      'invalid_argument',
      'bad version',
    );
    await expectRefused(
      await put({ 'fencing-token': '9', 'fencing-expected-version': '01' }),
      400,
      'invalid_argument',
      'leading-zero version',
    );
  });

  it('refuses a wrong or missing scope header', async () => {
    await expectRefused(
      await put({ 'fencing-token': '9', 'fencing-scope': 'report/1' }, '/jobs/1', 'POST'),
      400,
      'invalid_argument',
      'scope header naming another scope',
    );
    await expectRefused(
      await put({ 'fencing-token': '9' }, '/queue/a', 'POST'),
      400,
      'invalid_argument',
      'missing scope header',
    );
  });

  it('refuses an unknown mutating route with 404, oversized bodies with 413, long URLs with 414', async () => {
    await expectRefused(
      await put({ 'fencing-token': '9' }, '/nowhere', 'DELETE'),
      404,
      'not_found',
      'unmatched DELETE',
    );
    const big = await fetch(`${url}/reports/1`, {
      method: 'PUT',
      headers: { 'fencing-token': '9' },
      body: 'x'.repeat(5000),
    });
    await expectRefused(
      { status: big.status, body: await big.json() },
      413,
      'payload_too_large',
      'oversized body',
    );
    await expectRefused(
      await put({ 'fencing-token': '9' }, `/reports/${'a'.repeat(9000)}`),
      414,
      'uri_too_long',
      'long URL',
    );
  });

  it('answers oversized headers (431) and garbage framing (400) with the error shape', async () => {
    const huge = await rawHttp(
      url,
      `PUT /reports/1 HTTP/1.1\r\nHost: x\r\nFencing-Token: 9\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    assert.match(huge, /^HTTP\/1\.1 431/);
    assert.match(huge, /\{"error":\{"code":"headers_too_large","message":"[^"]+"\}\}$/);
    const garbage = await rawHttp(url, 'NOT HTTP AT ALL\r\n\r\n');
    assert.match(garbage, /^HTTP\/1\.1 400/);
    assert.match(garbage, /"code":"invalid_argument"/);
    assert.equal(upstream.count(), 1);
    assert.equal((await gw.marks.read('report/1')).highWaterMark, 5n);
  });

  it('refuses a malformed routes file naming the line and the field', () => {
    const cases: [string, RegExp][] = [
      [
        'routes:\n  - path: /a/:id\n    scope: a/{id}\n    policy: "=>"\n',
        /routes\.yaml:4: routes\[0\]\.policy must be '>=' or '>'/,
      ],
      [
        'routes:\n  - path: /a/:id\n    scope: a/{name}\n',
        /routes\.yaml:3: routes\[0\]\.scope uses \{name\}/,
      ],
      [
        'routes:\n  - path: a\n    scope: x\n',
        /routes\.yaml:2: routes\[0\]\.path must be a path pattern/,
      ],
      ['upstrem: http://x\nroutes: []\n', /routes\.yaml:1: upstrem is not a known field/],
      [
        'routes:\n  - path: /a\n    scope: a\n    methods: [PUT, FETCH]\n',
        /routes\.yaml:4: routes\[0\]\.methods\[1\] must be one of/,
      ],
      ['routes: [\n', /routes\.yaml:\d+: not valid YAML or JSON/],
      [
        '{"routes": [{"path": "/a", "scope": "a", "policy": 5}]}',
        /routes\.yaml:1: routes\[0\]\.policy/,
      ],
    ];
    for (const [text, re] of cases) {
      assert.throws(
        () => parseGatewayConfig(text, 'routes.yaml'),
        (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT') && re.test(err.message),
        text,
      );
    }
  });

  it('the CLI refuses to start on a malformed routes file and names the field', async () => {
    const t = tempDir('gw-cfg');
    try {
      const path = `${t.dir}/routes.yaml`;
      const { writeFileSync } = await import('node:fs');
      writeFileSync(path, 'routes:\n  - path: /a/:id\n    scope: a/{id}\n    policy: "=>"\n');
      const cli = spawnCli([
        'gateway',
        '--upstream',
        upstream.url,
        '--config',
        path,
        '--listen',
        '0',
      ]);
      const code = await cli.exited;
      assert.notEqual(code, 0);
      assert.match(cli.stderr(), /routes\.yaml:4: routes\[0\]\.policy/);
    } finally {
      t.remove();
    }
  });
});
